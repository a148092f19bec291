/* SPDX-License-Identifier: MIT */
/* The terminal side of `watch`: raw key input, the alternate screen, drawing
 * in place, and waiting for a key, a signal or the next poll. Whatever
 * wt_enter changes, wt_leave restores; it also runs at exit. */
#ifndef ESMT_CLI_WATCH_TERM_H
#define ESMT_CLI_WATCH_TERM_H

#include "watch_screen.h"

/* What ended wt_wait. */
enum { WT_TIMEOUT, WT_QUIT, WT_SIGNAL, WT_RESIZE, WT_STOP, WT_CLOSED };

/* The self-pipe that signals wake wt_wait with, and the stop signals
 * (SIGINT, SIGTERM, SIGHUP, SIGPIPE); `screen` adds SIGWINCH, SIGTSTP,
 * SIGCONT and SIGQUIT. Returns 0, or -1 (errno). */
int wt_signals_init(int screen);

/* The stop signal caught (SIGQUIT included), 0 when none. */
int wt_signal(void);

/* Non-canonical, no-echo input on standard input when it is a terminal
 * (`keys`), the alternate screen and a hidden cursor on standard output. */
void wt_enter(int keys);
void wt_leave(void);

/* The window's rows and columns (24 x 80 when unknown). */
void wt_size(int *rows, int *cols);

/* Draw the lines from the top left, each cut to `cols`, at most `rows` of
 * them, and clear the rest. */
void wt_draw(const watch_screen *s, int rows, int cols);

/* Wait until `deadline` (wt_now seconds): WT_QUIT on `q` (with `keys`),
 * WT_SIGNAL on a stop signal (wt_signal), WT_RESIZE on SIGWINCH or SIGCONT, WT_STOP on
 * SIGTSTP (Ctrl-Z), WT_CLOSED when standard output is closed at its other
 * end (`watch | head` after head exited, a terminal hung up), else
 * WT_TIMEOUT. */
int wt_wait(double deadline, int keys);

/* Ctrl-Z: give the terminal back, stop, and take it again once continued. */
void wt_suspend(int keys);

/* Monotonic seconds. */
double wt_now(void);

#endif
