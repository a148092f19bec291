/* SPDX-License-Identifier: MIT */
/* Text pieces of `watch`: sparklines, progress bars and short number
 * formats, each written into a caller's buffer (returned). `utf8` picks
 * Unicode block characters, else plain ASCII. A value that is NAN prints
 * as "-" (numbers) or a blank (sparklines). */
#ifndef ESMT_CLI_WATCH_SPARK_H
#define ESMT_CLI_WATCH_SPARK_H

#include <stddef.h>

/* A sparkline of n values, the first at `first` and each next one `stride`
 * bytes further (a field of an array of structs), in at most `cols`
 * columns: one column per value, or when there are more values than
 * columns each column the mean of its share of them (the whole history,
 * compressed). Scaled between the lowest and highest value shown. */
const char *ws_spark(const double *first, size_t n, size_t stride, int cols, int utf8, char *buf,
                     size_t cap);

/* "[#####.....]" of `cols` cells inside the brackets, frac in [0, 1];
 * UTF-8 shows eighths of a cell. */
const char *ws_bar(double frac, int cols, int utf8, char *buf, size_t cap);

/* Durations: "45s", "12m05s", "3h07m", "2d04h". */
const char *ws_duration(double seconds, char *buf, size_t cap);

/* Counts: "532", "5321", "53.2k", "1.23M", "4.56G". */
const char *ws_si(double v, char *buf, size_t cap);

/* printf of one double with `fmt` (e.g. "%.4f"), or "-" when not finite. */
const char *ws_num(const char *fmt, double v, char *buf, size_t cap);

/* Screen columns of UTF-8 text (one per code point; what watch prints is
 * all one column wide), and the byte length of its first `cols` columns. */
size_t ws_columns(const char *s);
size_t ws_prefix_bytes(const char *s, size_t cols);

#endif
