/* SPDX-License-Identifier: MIT */
/* `esmtrain-example launch -n N COMMAND ...`: data parallel on one machine.
 * Starts N copies of this program running COMMAND with the rank variables
 * torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), a
 * rendezvous file in a private temporary directory instead of a fixed
 * port (no port to collide with), and a job token. Ctrl-C/SIGTERM/SIGHUP go to
 * every rank (each saves and stops after the same update). When a rank
 * fails, the others learn it from the communicator and stop with its
 * reason; any rank still running after a grace period is terminated. When
 * the launcher itself dies (even by SIGKILL), every rank gets SIGTERM from
 * the kernel and stops as `train` does on SIGTERM: all ranks save after the
 * same update, so the run resumes exactly. */
#define _GNU_SOURCE /* prctl */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_RANKS 256

static volatile sig_atomic_t g_forward; /* a signal to pass on */

static void on_signal(int sig) { g_forward = sig; }

static void usage(FILE *f) {
  fprintf(f,
          "usage: esmtrain-example launch -n N [--grace SECONDS] COMMAND [ARGS...]\n"
          "  runs N ranks of `esmtrain-example COMMAND ARGS...` on this machine, data parallel\n"
          "  (e.g. launch -n 2 train --preset cpu --data DATA --out RUN).\n"
          "  On several machines use the launcher you have instead: torchrun-style variables\n"
          "  (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), srun under Slurm, or\n"
          "  mpirun (OMPI_COMM_WORLD_*); see README.\n");
}

static void set_int(const char *name, int v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(name, buf, 1);
}

int cmd_launch(int argc, char **argv) {
  int n = 0, first = -1;
  double grace = 30;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > MAX_RANKS) {
        fprintf(stderr, "esmtrain-example: launch: -n '%s': expected 1..%d ranks\n", argv[i],
                MAX_RANKS);
        return 2;
      }
      n = (int)v;
    } else if (!strcmp(argv[i], "--grace") && i + 1 < argc) {
      if (!cli_double_arg("esmtrain-example: launch", "--grace", argv[++i], 0, 86400, &grace))
        return 2;
    } else if (!strcmp(argv[i], "--")) {
      first = i + 1;
      break;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "esmtrain-example: launch: unknown option '%s'%s (try --help)\n", argv[i],
              cli_option_hint(argv[i], usage));
      return 2;
    } else {
      first = i;
      break;
    }
  }
  if (n < 1 || first < 0 || first >= argc) {
    usage(stderr);
    return 2;
  }
  char dir[] = "/tmp/esmtrain-launch-XXXXXX";
  if (!mkdtemp(dir)) {
    fprintf(stderr, "esmtrain-example: launch: mkdtemp: %s\n", strerror(errno));
    return 1;
  }
  char rdv[sizeof dir + 16], token[32], self[4096];
  snprintf(rdv, sizeof rdv, "%s/rendezvous", dir);
  snprintf(token, sizeof token, "%ld-%ld", (long)getpid(), (long)time(NULL));
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    fprintf(stderr, "esmtrain-example: launch: cannot find this program: %s\n", strerror(errno));
    rmdir(dir);
    return 1;
  }
  self[len] = '\0';
  char **args = calloc((size_t)(argc - first + 2), sizeof *args);
  if (!args) return 1;
  args[0] = self;
  for (int i = first; i < argc; i++) args[i - first + 1] = argv[i];

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  pid_t pids[MAX_RANKS];
  int alive = 0, rc = 0, failed_rank = -1;
  const pid_t launcher = getpid();
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p == 0) {
      /* Unsupervised ranks would train on with nobody to stop or report
       * them: the launcher's death is their SIGTERM (kept across exec). A
       * launcher that died before this call is seen in getppid(). */
      if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
        fprintf(stderr, "esmtrain-example: launch: rank %d not started: cannot have it stopped "
                "when the launcher dies (prctl: %s)\n", r, strerror(errno));
        _exit(127);
      }
      if (getppid() != launcher) {
        fprintf(stderr, "esmtrain-example: launch: rank %d not started: the launcher died\n", r);
        _exit(127);
      }
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      set_int("RANK", r);
      set_int("WORLD_SIZE", n);
      set_int("LOCAL_RANK", r);
      set_int("LOCAL_WORLD_SIZE", n);
      setenv("ESMTRAIN_RENDEZVOUS_FILE", rdv, 1);
      setenv("ESMTRAIN_JOB_TOKEN", token, 1);
      unsetenv("MASTER_ADDR");
      unsetenv("MASTER_PORT");
      execv(self, args);
      fprintf(stderr, "esmtrain-example: launch: exec %s: %s\n", self, strerror(errno));
      _exit(127);
    }
    if (p < 0) {
      fprintf(stderr, "esmtrain-example: launch: fork: %s\n", strerror(errno));
      for (int k = 0; k < r; k++) kill(pids[k], SIGTERM);
      n = r;
      rc = 1;
      break;
    }
    pids[r] = p;
    alive++;
  }
  double deadline = 0; /* after a failure: when stragglers get SIGTERM, then SIGKILL */
  int escalated = 0;
  while (alive > 0) {
    if (g_forward) {
      for (int r = 0; r < n; r++)
        if (pids[r] > 0) kill(pids[r], g_forward);
      g_forward = 0;
    }
    int status;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; r++) {
        if (pids[r] != p) continue;
        pids[r] = 0;
        alive--;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), who = r;
        if (code != 0 && !WIFSIGNALED(status) && failed_rank < 0) {
          /* A rank that exited with an error may only be reporting another
           * that was killed in the same instant: blame the killed one. */
          pid_t q;
          int st2, killed = 0;
          while ((q = waitpid(-1, &st2, WNOHANG)) > 0)
            for (int k = 0; k < n; k++) {
              if (pids[k] != q) continue;
              pids[k] = 0;
              alive--;
              if (WIFSIGNALED(st2) && !killed) {
                killed = 1;
                who = k;
                code = 128 + WTERMSIG(st2);
              }
            }
        }
        if (code != 0 && failed_rank < 0) {
          failed_rank = who;
          rc = code;
          fprintf(stderr, "esmtrain-example: launch: rank %d exited with status %d%s\n", who, code,
                  alive ? "; waiting for the other ranks to stop" : "");
          struct timespec ts;
          clock_gettime(CLOCK_MONOTONIC, &ts);
          deadline = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + grace;
        }
      }
      continue;
    }
    if (deadline > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
      if (now > deadline) {
        int sig = escalated ? SIGKILL : SIGTERM;
        fprintf(stderr, "esmtrain-example: launch: %d rank(s) still running %.0f s after rank %d "
                "failed; sending %s\n", alive, grace, failed_rank, escalated ? "SIGKILL" : "SIGTERM");
        for (int r = 0; r < n; r++)
          if (pids[r] > 0) kill(pids[r], sig);
        escalated = 1;
        deadline = now + 10;
      }
    }
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  unlink(rdv);
  rmdir(dir);
  free(args);
  return rc;
}
