/* SPDX-License-Identifier: MIT */
/* The wording every communicator uses for its operations, so that the TCP
 * ring and every communication plugin report alike (esmtrain/comm_plugin.h).
 * Header-only: a plugin includes it without linking the core. An operation is named by `op` ("allreduce", or
 * NULL before any), its sequence number `seq` (0 before the first) and the
 * training step it is tagged with (`step`, -1 for none). */
#ifndef ESMTRAIN_COMM_TEXT_H
#define ESMTRAIN_COMM_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "allreduce #37 (step 12): ", the prefix of an operation's errors. */
static inline void esmt_comm_op_prefix(char *buf, size_t cap, const char *op, uint64_t seq,
                                       int64_t step) {
  if (!op) snprintf(buf, cap, "communicator: ");
  else if (seq == 0) snprintf(buf, cap, "%s: ", op);
  else if (step >= 0)
    snprintf(buf, cap, "%s #%llu (step %lld): ", op, (unsigned long long)seq, (long long)step);
  else snprintf(buf, cap, "%s #%llu: ", op, (unsigned long long)seq);
}

/* "allreduce #37 (step 12), 4000000 bytes, done|failed|in progress" or
 * "no operation yet"; state 0 none, 1 in progress, 2 done, 3 failed. */
static inline void esmt_comm_describe_op(char *buf, size_t cap, const char *op, uint64_t seq,
                                         int64_t step, size_t bytes, int state) {
  if (!buf || cap == 0) return;
  if (!op || seq == 0) {
    snprintf(buf, cap, "no operation yet");
    return;
  }
  static const char *const states[] = {"", "in progress", "done", "failed"};
  char at[40] = "";
  if (step >= 0) snprintf(at, sizeof at, " (step %lld)", (long long)step);
  snprintf(buf, cap, "%s #%llu%s, %zu bytes, %s", op, (unsigned long long)seq, at, bytes,
           states[state & 3]);
}

#endif
