/* SPDX-License-Identifier: MIT */
/* Optional per-op time by role ($ESMT_PROFILE), logged at model destroy:
 *   ESMT_PROFILE=1       each op is synchronised and timed on the host (the
 *                        synchronisations cost the overlap an asynchronous
 *                        backend would have);
 *   ESMT_PROFILE=events  each op is bracketed by the backend's timing
 *                        events on the compute stream and nothing waits
 *                        until ESMT_PROFILE_PENDING ops are pending (or the
 *                        model is destroyed): the ops' time on the device, and
 *                        the device's idle time between consecutive ops
 *                        (kernel launches, host work, waits for other
 *                        streams, work outside the model's ops such as the
 *                        gradient all-reduce), for a step that runs as it
 *                        would unprofiled.
 * Keys are "<where> / <op>" ("backward: FFN down / gemm"), so GEMMs are
 * told apart by role; gemm and attention also sum their FLOPs. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void esmt_profile_init(esmt_model *m) {
  const char *v = getenv("ESMT_PROFILE");
  esmt_op_profile *p = &m->profile;
  p->mode = !v || !*v || !strcmp(v, "0") ? ESMT_PROFILE_OFF
          : !strcmp(v, "events")         ? ESMT_PROFILE_EVENTS : ESMT_PROFILE_SYNC;
  if (p->mode == ESMT_PROFILE_EVENTS && (!m->ops->timing_event_create || !m->ops->event_elapsed)) {
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_WARN, "ESMT_PROFILE=events: backend %s cannot "
                    "time its work with events; timing each op synchronised instead",
                    m->ops->name);
    p->mode = ESMT_PROFILE_SYNC;
  }
}

/* The FLOPs of one call of `op` (0 where they are not counted). */
static double op_flops(const char *op, const void *args) {
  if (!strcmp(op, "gemm")) {
    const esmtb_gemm_args *g = args;
    return 2.0 * g->m * (double)g->n * g->k;
  }
  const int fwd = !strcmp(op, "attention_forward"), bwd = !strcmp(op, "attention_backward");
  if (!fwd && !bwd) return 0;
  const esmtb_attention_args *a = args;
  if (a->segs.nseg > 0) return 0; /* packed: the lengths live on the device */
  /* QK^T and PV forward; the backward recomputes QK^T and adds dV, dP, dQ
   * and dK: 2.5x (FlashAttention-2's count). */
  const double f = 4.0 * a->B * (double)a->H * a->T * (double)a->T * a->hd;
  return fwd ? f : 2.5 * f;
}

static int key_index(esmt_op_profile *p, const char *where, const char *op) {
  char key[ESMT_PROFILE_KEY];
  snprintf(key, sizeof key, "%s / %s", where, op);
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->key[i], key)) return i;
  if (p->n == ESMT_PROFILE_SLOTS) return ESMT_PROFILE_SLOTS - 1; /* the last slot takes the rest */
  snprintf(p->key[p->n], sizeof p->key[p->n], "%s", p->n == ESMT_PROFILE_SLOTS - 1 ? "(other ops)" : key);
  return p->n++;
}

int esmt_test_profile_drop_sync;

/* Wait for the pending ops' last event and add their times. An interval
 * whose events cannot be read (not complete: the wait is what guarantees
 * they are) counts as untimed. */
static void read_back(esmt_model *m) {
  esmt_op_profile *p = &m->profile;
  const int n = p->pending;
  p->pending = 0;
  if (!n) return;
  if (!esmt_test_profile_drop_sync && m->ops->event_sync(m->dev, p->ev[2 * n - 1])) {
    p->untimed += (uint64_t)n;
    return;
  }
  double t;
  for (int i = 0; i < n; i++) {
    if (!m->ops->event_elapsed(m->dev, p->ev[2 * i], p->ev[2 * i + 1], &t)) {
      p->seconds[p->pend_key[i]] += t;
      p->flops[p->pend_key[i]] += p->pend_flops[i];
      p->calls[p->pend_key[i]]++;
    } else {
      p->untimed++;
    }
    if (i && !m->ops->event_elapsed(m->dev, p->ev[2 * i - 1], p->ev[2 * i], &t)) p->between_s += t;
  }
  if (!m->ops->event_elapsed(m->dev, p->ev[0], p->ev[2 * n - 1], &t)) p->span_s += t;
}

double esmt_profile_begin(esmt_model *m) {
  esmt_op_profile *p = &m->profile;
  if (p->mode == ESMT_PROFILE_SYNC) {
    m->ops->stream_sync(m->dev, m->stream);
    return esmt_now_s();
  }
  if (p->mode != ESMT_PROFILE_EVENTS) return 0.0;
  if (!p->ev[0]) /* first op: the events, once */
    for (int i = 0; i < 2 * ESMT_PROFILE_PENDING; i++)
      if (m->ops->timing_event_create(m->dev, &p->ev[i])) {
        esmt_logger_log(&m->ctx->logger, ESMT_LOG_WARN, "ESMT_PROFILE=events: %s; profiling "
                        "off", esmt_last_error());
        p->mode = ESMT_PROFILE_OFF;
        return 0.0;
      }
  if (p->pending == ESMT_PROFILE_PENDING) read_back(m);
  m->ops->event_record(m->dev, p->ev[2 * p->pending], m->stream);
  return 0.0;
}

void esmt_profile_end(esmt_model *m, const char *where, const char *op, const void *args,
                      double t0) {
  esmt_op_profile *p = &m->profile;
  if (p->mode == ESMT_PROFILE_OFF) return;
  const int k = key_index(p, where, op);
  if (p->mode == ESMT_PROFILE_SYNC) {
    m->ops->stream_sync(m->dev, m->stream);
    p->seconds[k] += esmt_now_s() - t0;
    p->flops[k] += op_flops(op, args);
    p->calls[k]++;
    return;
  }
  m->ops->event_record(m->dev, p->ev[2 * p->pending + 1], m->stream);
  p->pend_key[p->pending] = k;
  p->pend_flops[p->pending] = op_flops(op, args);
  p->pending++;
}

void esmt_profile_report(esmt_model *m) {
  esmt_op_profile *p = &m->profile;
  if (p->mode == ESMT_PROFILE_EVENTS) read_back(m);
  const char *how = p->mode == ESMT_PROFILE_EVENTS ? "events" : "synchronised";
  double total = 0;
  for (int i = 0; i < p->n; i++) total += p->seconds[i];
  int order[ESMT_PROFILE_SLOTS];
  for (int i = 0; i < p->n; i++) order[i] = i;
  for (int i = 1; i < p->n; i++) /* by time, longest first */
    for (int j = i; j > 0 && p->seconds[order[j]] > p->seconds[order[j - 1]]; j--) {
      const int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int r = 0; r < p->n; r++) {
    const int i = order[r];
    char rate[32] = "";
    if (p->flops[i] > 0 && p->seconds[i] > 0)
      snprintf(rate, sizeof rate, " %9.4g TFLOP/s", p->flops[i] / p->seconds[i] * 1e-12);
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_INFO, "profile (%s): %-44s %10.3f ms %5.1f%% "
                    "%7llu calls%s", how, p->key[i], 1e3 * p->seconds[i],
                    total > 0 ? 100.0 * p->seconds[i] / total : 0.0,
                    (unsigned long long)p->calls[i], rate);
  }
  if (p->mode == ESMT_PROFILE_EVENTS) {
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_INFO, "profile (events): ops %.3f ms, between "
                    "ops %.3f ms, span %.3f ms", 1e3 * total, 1e3 * p->between_s,
                    1e3 * p->span_s);
    if (p->untimed)
      esmt_logger_log(&m->ctx->logger, ESMT_LOG_WARN, "profile (events): %llu ops untimed "
                      "(their events could not be read)", (unsigned long long)p->untimed);
    for (int i = 0; i < 2 * ESMT_PROFILE_PENDING && p->ev[i]; i++) {
      m->ops->event_destroy(m->dev, p->ev[i]);
      p->ev[i] = NULL;
    }
  }
}
