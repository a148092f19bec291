/* SPDX-License-Identifier: MIT */
/* See loss_scaler.h. */
#include "loss_scaler.h"

#include <math.h>
#include <string.h>

esmt_status esmt_loss_scaler_init(esmt_loss_scaler *s, const esmt_loss_scale_config *c) {
  memset(s, 0, sizeof *s);
  s->scale = 1.0;
  if (!c->enabled) return ESMT_OK;
  if (!(c->initial >= 1 && c->initial <= 1e30) || !(c->min > 0 && c->min <= c->initial) ||
      !(c->backoff > 0 && c->backoff < 1) || c->growth_interval < 1 || c->hysteresis < 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "loss scale: need 0 < min <= initial <= 1e30, 0 < backoff < 1, "
                     "growth_interval >= 1 and hysteresis >= 1 (got initial %g, min %g, "
                     "backoff %g, growth_interval %lld, hysteresis %d)",
                     c->initial, c->min, c->backoff, (long long)c->growth_interval, c->hysteresis);
  s->enabled = 1;
  s->scale = c->initial;
  s->backoff = c->backoff;
  s->min = c->min;
  s->growth_interval = c->growth_interval;
  s->hysteresis = c->hysteresis;
  s->hysteresis_left = c->hysteresis;
  return ESMT_OK;
}

esmt_scaler_event esmt_loss_scaler_update(esmt_loss_scaler *s, int overflow) {
  if (!s->enabled) return ESMT_SCALER_CLEAN;
  if (!overflow) {
    s->consecutive = 0;
    s->hysteresis_left = s->hysteresis; /* hysteresis counts overflows in a row */
    if (++s->clean_run < s->growth_interval) return ESMT_SCALER_CLEAN;
    s->clean_run = 0;
    s->hysteresis_left = s->hysteresis;
    if (s->scale * 2 > 1e30) return ESMT_SCALER_CLEAN; /* a ceiling keeps it finite */
    s->scale *= 2;
    return ESMT_SCALER_GREW;
  }
  s->overflows++;
  s->consecutive++;
  s->clean_run = 0;
  if (--s->hysteresis_left > 0) return ESMT_SCALER_SKIPPED;
  double next = s->scale * s->backoff;
  if (next < s->min) {
    s->hysteresis_left = 0;
    return ESMT_SCALER_AT_FLOOR;
  }
  s->scale = next;
  s->hysteresis_left = s->hysteresis;
  return ESMT_SCALER_BACKED_OFF;
}
