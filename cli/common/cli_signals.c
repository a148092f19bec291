/* SPDX-License-Identifier: MIT */
/* Signals and standard output of the CLI commands (cli.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The signals that end a command: Ctrl-C, kill, the terminal closing, the
 * reader of our output going away, the file size limit. */
static const int k_stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGXFSZ};
#define N_STOP (int)(sizeof k_stop_signals / sizeof k_stop_signals[0])

static volatile sig_atomic_t g_caught;
static void (*volatile g_hook)(int);

static void on_stop_signal(int sig) {
  if (!g_caught) g_caught = sig;
  void (*hook)(int) = g_hook;
  if (hook) hook(sig);
}

void cli_signals_init(void) {
  /* A closed pipe or the file size limit fails the write with EPIPE/EFBIG,
   * which the code reports, instead of killing the process silently. */
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
}

void cli_signals_catch(void (*hook)(int sig)) {
  g_hook = hook;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal; /* no SA_RESTART: a blocked read returns EINTR */
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < N_STOP; i++) sigaction(k_stop_signals[i], &sa, NULL);
}

void cli_signals_set_hook(void (*hook)(int sig)) { g_hook = hook; }

int cli_signal_caught(void) { return g_caught; }

static void stop_set(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  sigaddset(set, SIGHUP);
}

void cli_signals_defer(void) {
  sigset_t set;
  stop_set(&set);
  sigprocmask(SIG_BLOCK, &set, NULL);
}

int cli_signals_deferred(void) {
  sigset_t pending, stop;
  stop_set(&stop);
  if (sigpending(&pending) != 0) return 0;
  for (int i = 0; i < N_STOP; i++)
    if (sigismember(&stop, k_stop_signals[i]) && sigismember(&pending, k_stop_signals[i]))
      return k_stop_signals[i];
  return 0;
}

const char *cli_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP (the terminal or session closed)";
    case SIGPIPE: return "SIGPIPE (the reader of the output went away, e.g. `| head`)";
    case SIGXFSZ: return "SIGXFSZ (a file reached the size limit, `ulimit -f`)";
    default: return "a signal";
  }
}

/* Why writing to standard output failed, when errno no longer says: a pipe
 * whose reader is gone reports POLLERR; anything else stays unnamed. */
static int stdout_errno(int err) {
  if (err) return err;
  struct pollfd p = {STDOUT_FILENO, POLLOUT, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return EPIPE;
  if (p.revents & POLLNVAL) return EBADF;
  return 0;
}

int cli_stdout_finish(int rc) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
  int err = stdout_errno(errno);
  if (err == EPIPE) {
    /* the reader went away (`| head`): end as coreutils do, quietly, by
     * the SIGPIPE that was ignored for the writes (status 141 in a shell) */
    fflush(stderr);
    signal(SIGPIPE, SIG_DFL);
    raise(SIGPIPE);
    return rc ? rc : 128 + SIGPIPE;
  }
  if (rc == 0)
    fprintf(stderr, "esmtrain-example: cannot write to standard output: %s\n",
            err ? strerror(err) : "a write failed (the output is closed, the disk full, or a "
            "file size limit reached)");
  return rc ? rc : 1;
}
