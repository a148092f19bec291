/* SPDX-License-Identifier: MIT */
/* Shared by test_mixed_fake (half ops emulated) and test_mixed_precision
 * (the cpu backend's own half ops): train the same tiny model in fp32 and
 * in half precision and compare. */
#ifndef MIXED_COMPARE_H
#define MIXED_COMPARE_H

#include "esmtrain/esmtrain.h"

/* A tiny ESM-2 (2 layers, d = 32, 4 heads) computing in `p`. */
esmt_model_config mixed_tiny_config(esmt_precision p);

/* m32 and mh: the same config and seed, fp32 and half. On one fixed masked
 * batch: logits and loss of the first forward, every parameter gradient of
 * the first backward (relative L2 per tensor within grad_tol; tensors whose
 * fp32 norm is below 1e-3 of the largest, such as the key bias whose exact
 * gradient is 0, are held to grad_tol of that largest norm instead), then
 * the loss after each of `steps` AdamW steps (relative, within loss_tol),
 * which must also fall. */
void mixed_compare(esmt_model *m32, esmt_model *mh, int steps, double loss_tol, double grad_tol);

#endif
