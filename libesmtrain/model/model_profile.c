/* SPDX-License-Identifier: MIT */
/* Optional per-op timing ($ESMT_PROFILE=1): each op is synchronised and
 * timed; the totals are logged when the model is destroyed. Off by default
 * because the synchronisation costs overlap on asynchronous backends. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "model.h"


double esmt_profile_begin(esmt_model *m) {
  if (!m->profile.enabled) return 0.0;
  m->ops->stream_sync(m->dev, m->stream);
  return esmt_now_s();
}

void esmt_profile_end(esmt_model *m, const char *op, double t0) {
  if (!m->profile.enabled) return;
  m->ops->stream_sync(m->dev, m->stream);
  double dt = esmt_now_s() - t0;
  esmt_op_profile *p = &m->profile;
  for (int i = 0; i < ESMT_PROFILE_SLOTS; i++) {
    if (!p->name[i]) p->name[i] = op;
    if (strcmp(p->name[i], op) == 0) {
      p->seconds[i] += dt;
      p->calls[i]++;
      return;
    }
  }
}

void esmt_profile_report(esmt_model *m) {
  const esmt_op_profile *p = &m->profile;
  if (!p->enabled) return;
  double total = 0;
  for (int i = 0; i < ESMT_PROFILE_SLOTS && p->name[i]; i++) total += p->seconds[i];
  for (int i = 0; i < ESMT_PROFILE_SLOTS && p->name[i]; i++)
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_INFO, "profile: %-20s %8.1f ms %5.1f%% %6llu calls",
                    p->name[i], 1e3 * p->seconds[i], 100.0 * p->seconds[i] / total,
                    (unsigned long long)p->calls[i]);
}
