/* SPDX-License-Identifier: MIT */
/* Learning-rate schedules (closed forms; see esmtrain.h). */
#include <math.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

esmt_status esmt_schedule_lr(const esmt_schedule *s, int64_t step, double *lr) {
  const char *fn = "esmt_schedule_lr";
  ESMT_CHECK_ARG(s && lr, fn, "schedule and lr must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_schedule", s->struct_size, sizeof *s);
  if (st) return st;
  if (step < 1) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: step %lld must be >= 1", fn,
                                 (long long)step);
  if (!(s->peak_lr >= 0) || s->warmup_steps < 0 || !(s->final_lr_fraction >= 0) ||
      s->final_lr_fraction > 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: need peak_lr >= 0, warmup_steps >= 0 and "
                     "final_lr_fraction in [0, 1]", fn);
  const double peak = s->peak_lr, floor_lr = peak * s->final_lr_fraction;
  if (step < s->warmup_steps) {
    *lr = peak * (double)step / (double)s->warmup_steps;
    return ESMT_OK;
  }
  switch (s->kind) {
    case ESMT_SCHEDULE_CONSTANT:
      *lr = peak;
      return ESMT_OK;
    case ESMT_SCHEDULE_ESM2: {
      if (!(s->decay_end_fraction > 0 && s->decay_end_fraction <= 1) || s->total_steps < 1)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: esm2 needs total_steps >= 1 and "
                         "decay_end_fraction in (0, 1]", fn);
      double end = s->decay_end_fraction * (double)s->total_steps;
      double span = end - (double)s->warmup_steps;
      double t = span > 0 ? ((double)step - (double)s->warmup_steps) / span : 1.0;
      *lr = t >= 1.0 ? floor_lr : peak + (floor_lr - peak) * t;
      return ESMT_OK;
    }
    case ESMT_SCHEDULE_COSINE: {
      if (s->total_steps < 1)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: cosine needs total_steps >= 1", fn);
      double span = (double)(s->total_steps - s->warmup_steps);
      double t = span > 0 ? ((double)step - (double)s->warmup_steps) / span : 1.0;
      if (t > 1.0) t = 1.0;
      *lr = floor_lr + 0.5 * (peak - floor_lr) * (1.0 + cos(3.141592653589793 * t));
      return ESMT_OK;
    }
  }
  return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: unknown schedule kind %d", fn, (int)s->kind);
}
