/* SPDX-License-Identifier: MIT */
/* Class weights of a seq-class table (finetune.h): scikit-learn's
 * "balanced" weights of the training split, and the weights a loader's
 * batches carry to the head's cross-entropy (esmt_batch.class_weights). */
#include <math.h>
#include <stdlib.h>

#include "labelled.h"

esmt_status esmt_labelled_balanced_weights(const esmt_labelled *d, float *weights, int count) {
  const char *fn = "esmt_labelled_balanced_weights";
  ESMT_CHECK_ARG(d && weights, fn, "data and weights must not be NULL");
  if (d->task != ESMT_HEAD_SEQ_CLASS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: class weights are for a seq-class table",
                     fn);
  if (count != d->num_labels)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %d weights for %d classes", fn, count,
                     d->num_labels);
  uint64_t *n = calloc((size_t)count, sizeof *n), total = 0;
  if (!n) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  for (uint64_t r = 0; r < d->rows; r++)
    if (d->split[r] == ESMT_LABELLED_TRAIN && d->classes[r] >= 0 && d->classes[r] < count) {
      n[d->classes[r]]++;
      total++;
    }
  /* n_samples / (n_classes * bincount(y)); every class has a training row */
  for (int k = 0; k < count; k++)
    weights[k] = n[k] ? (float)((double)total / ((double)count * (double)n[k])) : 0.0f;
  free(n);
  return ESMT_OK;
}
