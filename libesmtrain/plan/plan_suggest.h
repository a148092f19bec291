/* SPDX-License-Identifier: MIT */
/* When a training plan does not fit: the arithmetic of why (the fp32
 * state the optimizer needs against the ranks' device and host memory)
 * and what the engine can run instead on the same machine, with figures. */
#ifndef ESMTRAIN_PLAN_SUGGEST_H
#define ESMTRAIN_PLAN_SUGGEST_H

#include <stddef.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* For a request that does not fit, write into out (cap bytes) why and the
 * first of these that fits on the same ranks, budgets and stage choice:
 * Lion (one moment instead of two), bf16 compute, both, then the largest
 * smaller ESM-2 preset. Returns 1 when it wrote, 0 when it has nothing to
 * add (one process, whose advice says what to change; no budgets; a model
 * with frozen parts). */
ESMT_HIDDEN int esmt_plan_suggest(const esmt_plan_request *r, char *out, size_t cap);

#endif
