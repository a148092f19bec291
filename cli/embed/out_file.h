/* SPDX-License-Identifier: MIT */
/* Files a command creates in its output directory and re-opens later (a
 * resume), without ever writing into a file it did not create: created
 * with O_EXCL|O_NOFOLLOW, re-opened only without following a symbolic
 * link, only as a regular file with a single link, and only when it is
 * still the file the command recorded (device, inode and creation time). */
#ifndef ESMT_CLI_OUT_FILE_H
#define ESMT_CLI_OUT_FILE_H

#include <stddef.h>

#define CLI_OUT_ID_CAP 80

/* Create `path`, which must not exist (a symbolic link there is not
 * followed). Returns the descriptor (read-write), or -1 after printing
 * "esmtrain-example: CMD: PATH: cannot create: why". */
int cli_out_create(const char *cmd, const char *path);

/* Re-open `path` read-write for a resume: it must be a regular file with
 * one link, reached without a symbolic link, and `recorded` ("DEV:INO:BIRTH"
 * from cli_out_id when it was created) must name it. Returns the
 * descriptor, or -1 after printing why it is not the command's file. */
int cli_out_reopen(const char *cmd, const char *path, const char *recorded);

/* "DEV:INO:BIRTH" (creation time; "DEV:INO" where the file system keeps
 * none) of an open file into out[CLI_OUT_ID_CAP] ("" when statx fails). */
void cli_out_id(int fd, char *out, size_t cap);

/* 1 when `path` (not followed) is a regular file with one link whose
 * "DEV:INO:BIRTH" is `recorded` (NULL: any): a leftover the command may remove. */
int cli_out_is_own(const char *path, const char *recorded);

#endif
