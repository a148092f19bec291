/* SPDX-License-Identifier: MIT */
/* The contact head (esm.contact_head.regression.{weight,bias}): carried
 * byte for byte from an imported checkpoint (carried_tensors.h), read by
 * contact prediction and replaced by a trained one (infer.h). */
#include <string.h>

#include "carried_tensors.h"

static const char k_weight[] = "esm.contact_head.regression.weight";
static const char k_bias[] = "esm.contact_head.regression.bias";

esmt_status esmt_model_contact_head(esmt_model *model, float *weight, int count, float *bias) {
  const char *fn = "esmt_model_contact_head";
  ESMT_CHECK_ARG(model && weight && bias, fn, "NULL argument");
  const int K = model->L * model->H;
  if (count != K)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: count %d, the head has layers x heads = %d "
                     "weights", fn, count, K);
  const esmt_carried_tensor *w = esmt_carried_find(model, k_weight);
  const esmt_carried_tensor *b = esmt_carried_find(model, k_bias);
  if (!w || !b)
    return esmt_fail(ESMT_ERR_STATE, "the model has no contact head (%s): import a checkpoint "
                     "that has one, or train one (esmt_contact_head_train)", k_weight);
  if (esmt_carried_numel(w) != (uint64_t)K || esmt_carried_numel(b) != 1)
    return esmt_fail(ESMT_ERR_FORMAT, "the model's contact head has %llu weights and %llu "
                     "biases; this model needs %d and 1", (unsigned long long)esmt_carried_numel(w),
                     (unsigned long long)esmt_carried_numel(b), K);
  esmt_carried_to_f32(w, weight);
  esmt_carried_to_f32(b, bias);
  int trained = *bias != 0.0f;
  for (int k = 0; k < K && !trained; k++) trained = weight[k] != 0.0f;
  if (!trained) /* what an export of a model without a head writes */
    return esmt_fail(ESMT_ERR_STATE, "the model's contact head is all zeros (never trained): "
                     "train one (esmt_contact_head_train) or import a checkpoint with one");
  return ESMT_OK;
}

esmt_status esmt_model_set_contact_head(esmt_model *model, const float *weight, int count,
                                        float bias) {
  const char *fn = "esmt_model_set_contact_head";
  ESMT_CHECK_ARG(model && weight, fn, "NULL argument");
  const int K = model->L * model->H;
  if (count != K)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: count %d, the head has layers x heads = %d "
                     "weights", fn, count, K);
  const int64_t wshape[2] = {1, K}, bshape[1] = {1};
  esmt_status st = esmt_carried_put_f32(model, k_weight, 2, wshape, weight);
  return st ? st : esmt_carried_put_f32(model, k_bias, 1, bshape, &bias);
}
