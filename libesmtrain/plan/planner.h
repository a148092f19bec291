/* SPDX-License-Identifier: MIT */
/* The memory planner's core (planner.c), without the advice of what fits
 * instead: what plan_memory.c and plan_suggest.c call. */
#ifndef ESMTRAIN_PLANNER_H
#define ESMTRAIN_PLANNER_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

/* esmt_plan_memory without plan_suggest.c's advice (what the suggestions
 * try, each a whole plan). */
ESMT_HIDDEN esmt_status esmt_plan_memory_only(const esmt_plan_request *r, esmt_plan *plan);

#endif
