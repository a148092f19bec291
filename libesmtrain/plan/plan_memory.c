/* SPDX-License-Identifier: MIT */
/* esmt_plan_memory: the planner (planner.c) and, for a plan that does not
 * fit on several ranks, what fits instead (plan_suggest.c). A file of its
 * own so that the suggestions, which plan again, and the planner do not
 * call each other. */
#include <stdio.h>

#include "plan_suggest.h"
#include "planner.h"

esmt_status esmt_plan_memory(const esmt_plan_request *r, esmt_plan *plan) {
  esmt_status st = esmt_plan_memory_only(r, plan);
  if (st != ESMT_ERR_OUT_OF_MEMORY) return st;
  char why[sizeof plan->advice];
  snprintf(why, sizeof why, "%s", plan->advice);
  if (esmt_plan_suggest(r, plan->advice, sizeof plan->advice)) /* the advice replaced */
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_plan_memory: %s", plan->advice);
  return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_plan_memory: %s", why);
}
