/* SPDX-License-Identifier: MIT */
/* The process's MPI, as opposed to one communicator: starting it with a
 * thread level the plugin can use, naming the library, and finalising it.
 *
 * When to finalise. MPI starts once per process: after MPI_Finalize no
 * MPI_Init is allowed, so finalising in destroy would make every later
 * create fail (a trainer that rebuilds its communicator, the tests that
 * create one per case). So MPI stays up until the process exits: create
 * registers an atexit handler, which runs at exit() (or at dlclose of the
 * plugin; the core keeps it open) and finalises MPI only when this plugin
 * started it - an application that initialised MPI finalises it itself.
 *
 * Why a check-in before MPI_Finalize: Open MPI's finalise waits for every
 * rank (a PMIx fence). After a communicator failed on a timeout a peer may
 * be hung for good, and a rank that waits for it at exit never exits, so the
 * launcher never learns the job failed. The handler therefore first runs an
 * MPI_Ibarrier on MPI_COMM_WORLD: without a failure it waits as long as
 * finalise would; after a timeout or abandoned requests (a "hazard") it
 * waits at most max(10 s, timeout) and, if some rank did not arrive, skips
 * MPI_Finalize - the process exits unfinalised and mpirun ends the job as
 * failed, which it has. Every rank runs the barrier, so ranks with and
 * without a hazard agree. */
#define _POSIX_C_SOURCE 200809L
#include "mpi_comm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_started;         /* this plugin called MPI_Init_thread */
static int g_exit_registered; /* finalize_at_exit is registered */
static double g_hazard_s;     /* > 0: bound the exit check-in (see above) */

double mc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mc_nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

void mc_error_string(int code, char *buf, size_t cap) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) == MPI_SUCCESS && len > 0)
    snprintf(buf, cap, "%.*s", len, s);
  else snprintf(buf, cap, "MPI error %d", code);
}

static const char *level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  default: return "an unknown thread level";
  }
}

static void finalize_at_exit(void) {
  int fin = 1;
  if (!g_started || MPI_Finalized(&fin) != MPI_SUCCESS || fin) return;
  MPI_Request rq;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &rq) != MPI_SUCCESS) return; /* MPI is broken: leave it */
  double limit = g_hazard_s > 10.0 ? g_hazard_s : 10.0, t0 = mc_now();
  int done = 0;
  while (!done) {
    if (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    if (done) break;
    if (g_hazard_s > 0 && mc_now() - t0 > limit) {
      fprintf(stderr,
              "esmtrain MPI communicator: not calling MPI_Finalize: after a communicator "
              "failure not every rank reached exit within %.0f s\n",
              limit);
      return;
    }
    mc_nap(1000000);
  }
  MPI_Finalize();
}

int mc_runtime_start(char *err, size_t cap) {
  int fin = 0, init = 0;
  MPI_Finalized(&fin);
  if (fin) {
    snprintf(err, cap,
             "MPI was already finalised in this process and cannot start again (MPI allows one "
             "MPI_Init per process): create the MPI communicator before MPI_Finalize");
    return 1;
  }
  MPI_Initialized(&init);
  if (!init) {
    int provided = MPI_THREAD_SINGLE;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
      char e[MPI_MAX_ERROR_STRING + 1];
      mc_error_string(rc, e, sizeof e);
      snprintf(err, cap, "MPI_Init_thread failed: %s", e);
      return 1;
    }
    g_started = 1;
    /* We own this MPI: its errors come back as codes instead of ending the
     * process (the plugin never exits on its own). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  if (g_started && !g_exit_registered) {
    if (atexit(finalize_at_exit) != 0) {
      snprintf(err, cap, "atexit failed: MPI could not be finalised at exit");
      return 1;
    }
    g_exit_registered = 1;
  }
  /* Calls come from one thread at a time, but not always the same one (a
   * trainer's communication thread, then the main thread): SERIALIZED. */
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) {
    if (g_started)
      snprintf(err, cap,
               "this MPI library provides %s only; the MPI communicator needs "
               "MPI_THREAD_SERIALIZED (calls from one thread at a time, not always the same one)",
               level_name(level));
    else
      snprintf(err, cap,
               "MPI was initialised by the application with %s; the MPI communicator needs "
               "MPI_THREAD_SERIALIZED or higher: start MPI with MPI_Init_thread(..., "
               "MPI_THREAD_SERIALIZED, ...)",
               level_name(level));
    return 1;
  }
  return 0;
}

void mc_runtime_note_hazard(double timeout_s) {
  if (timeout_s > g_hazard_s) g_hazard_s = timeout_s;
  if (g_hazard_s <= 0) g_hazard_s = 1.0;
}

const char *mc_describe(void) {
  /* Written once; the same text if two threads race to write it. */
  static char line[160];
  if (line[0]) return line;
  char v[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS || len <= 0) {
    snprintf(line, sizeof line, "MPI, version unknown");
    return line;
  }
  v[len < (int)sizeof v ? len : (int)sizeof v - 1] = '\0';
  /* First line, up to the first comma ("Open MPI v4.1.4, package: ..."),
   * blanks collapsed ("MPICH Version:\t4.0"). */
  size_t n = 0;
  int blank = 0;
  for (const char *p = v; *p && *p != '\n' && *p != ',' && n + 1 < sizeof line; p++) {
    if (*p == ' ' || *p == '\t' || *p == '\r') {
      blank = n > 0;
      continue;
    }
    if (blank && n + 2 < sizeof line) line[n++] = ' ';
    blank = 0;
    line[n++] = *p;
  }
  line[n] = '\0';
  if (!n) snprintf(line, sizeof line, "MPI, version unknown");
  return line;
}
