/* SPDX-License-Identifier: MIT */
/* The terminal of `watch` (watch_term.h): plain ANSI escapes, termios. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* TIOCGWINSZ */
#include "watch_term.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "watch_spark.h"

static int g_wake[2] = {-1, -1};
static volatile sig_atomic_t g_resize, g_stop, g_quit;

static struct {
  int active;     /* the alternate screen is on */
  int raw;        /* standard input's settings are changed (saved below) */
  struct termios saved;
  int at_exit;    /* wt_leave registered with atexit */
} g_term;

double wt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- signals ---- */

/* Async-signal-safe: one byte into the self-pipe wakes poll(). */
static void wake(int sig) {
  const int saved = errno;
  const char c = (char)sig;
  if (g_wake[1] >= 0 && write(g_wake[1], &c, 1) < 0) { /* full: a wake-up is pending anyway */ }
  errno = saved;
}

static void on_resize(int sig) {
  g_resize = 1;
  wake(sig);
}

static void on_stop(int sig) {
  g_stop = 1;
  wake(sig);
}

/* Ctrl-\: its default (a core dump) would leave the terminal as watch set it. */
static void on_quit(int sig) {
  g_quit = sig;
  wake(sig);
}

static void handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

int wt_signals_init(int screen) {
  if (g_wake[0] < 0) {
    if (pipe(g_wake) != 0) return -1;
    for (int i = 0; i < 2; i++) {
      fcntl(g_wake[i], F_SETFL, fcntl(g_wake[i], F_GETFL) | O_NONBLOCK);
      fcntl(g_wake[i], F_SETFD, FD_CLOEXEC);
    }
  }
  cli_signals_catch(wake);
  if (screen) {
    handle(SIGWINCH, on_resize);
    handle(SIGCONT, on_resize); /* back from a stop: take the terminal again */
    handle(SIGTSTP, on_stop);
    handle(SIGQUIT, on_quit);
  }
  return 0;
}

int wt_signal(void) { return cli_signal_caught() ? cli_signal_caught() : g_quit; }

/* ---- the terminal ---- */

static void put_all(const char *s, size_t n) {
  while (n) {
    const ssize_t w = write(STDOUT_FILENO, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* the terminal is gone: nothing to restore it on */
    s += w;
    n -= (size_t)w;
  }
}

static void put_str(const char *s) { put_all(s, strlen(s)); }

void wt_enter(int keys) {
  if (keys && isatty(STDIN_FILENO)) {
    struct termios t;
    if (!g_term.raw && tcgetattr(STDIN_FILENO, &g_term.saved) == 0) g_term.raw = 1;
    if (g_term.raw) {
      t = g_term.saved;
      /* keys one at a time, unechoed; ISIG stays on: Ctrl-C is SIGINT, Ctrl-Z SIGTSTP */
      t.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
      t.c_cc[VMIN] = 0;
      t.c_cc[VTIME] = 0;
      tcsetattr(STDIN_FILENO, TCSANOW, &t);
    }
  }
  /* alternate screen, cursor hidden, cleared (again after a stop: the shell used it) */
  put_str("\033[?1049h\033[?25l\033[H\033[2J");
  g_term.active = 1;
  if (!g_term.at_exit) g_term.at_exit = atexit(wt_leave) == 0;
}

void wt_leave(void) {
  if (g_term.active) put_str("\033[?25h\033[?1049l");
  g_term.active = 0;
  if (g_term.raw) tcsetattr(STDIN_FILENO, TCSANOW, &g_term.saved);
  g_term.raw = 0;
}

void wt_suspend(int keys) {
  wt_leave();
  signal(SIGTSTP, SIG_DFL);
  raise(SIGTSTP); /* stopped here until continued */
  handle(SIGTSTP, on_stop);
  wt_enter(keys);
}

void wt_size(int *rows, int *cols) {
  struct winsize ws;
  *rows = 24;
  *cols = 80;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    *rows = ws.ws_row;
    *cols = ws.ws_col;
  }
}

/* Control characters (from a path or a message) would move the cursor. */
static void put_clean(char *dst, size_t *len, const char *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const unsigned char c = (unsigned char)src[i];
    dst[(*len)++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
  }
}

void wt_draw(const watch_screen *s, int rows, int cols) {
  static char out[WATCH_MAX_LINES * (WATCH_LINE_BYTES + 8) + 16];
  size_t len = 0;
  memcpy(out, "\033[H", 3);
  len = 3;
  const int n = s->n < rows ? s->n : rows;
  for (int i = 0; i < n; i++) {
    /* the bottom right cell is left empty: writing it could scroll */
    const size_t fit = (size_t)(i == rows - 1 ? cols - 1 : cols);
    put_clean(out, &len, s->line[i], ws_prefix_bytes(s->line[i], fit));
    memcpy(out + len, "\033[K", 3);
    len += 3;
    if (i + 1 < n) {
      memcpy(out + len, "\r\n", 2);
      len += 2;
    }
  }
  memcpy(out + len, "\033[J", 3);
  put_all(out, len + 3);
}

/* ---- waiting ---- */

static void drain(int fd) {
  char buf[64];
  while (read(fd, buf, sizeof buf) > 0) {}
}

/* 1 when the keys read hold a q. */
static int read_quit(void) {
  char buf[64];
  const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == 'q' || buf[i] == 'Q') return 1;
  return 0;
}

int wt_wait(double deadline, int keys) {
  keys = keys && isatty(STDIN_FILENO);
  for (;;) {
    if (wt_signal()) return WT_SIGNAL;
    if (g_stop) {
      g_stop = 0;
      return WT_STOP;
    }
    if (g_resize) {
      g_resize = 0;
      return WT_RESIZE;
    }
    const double left = deadline - wt_now();
    if (left <= 0) return WT_TIMEOUT;
    /* standard output with no events asked: poll still reports a pipe
     * whose reader is gone (POLLERR) or a terminal hung up (POLLHUP) */
    struct pollfd p[3] = {{g_wake[0], POLLIN, 0}, {STDOUT_FILENO, 0, 0}, {STDIN_FILENO, POLLIN, 0}};
    const int r = poll(p, keys ? 3 : 2, (int)(left * 1000.0) + 1);
    if (r < 0 && errno != EINTR) return WT_TIMEOUT;
    if (r <= 0) continue;
    if (p[0].revents & POLLIN) drain(g_wake[0]);
    if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) return WT_CLOSED;
    if (keys && (p[2].revents & POLLIN) && read_quit()) return WT_QUIT;
    if (keys && (p[2].revents & (POLLHUP | POLLERR | POLLNVAL))) keys = 0; /* input gone */
  }
}
