/* SPDX-License-Identifier: MIT */
/* The float64 PyTorch reference fixtures (tests/reference/make_fixtures.py):
 * loading one, putting its weights into a model, and comparing a model's
 * tensors with its reference tensors. Shared by test_model_reference (cpu)
 * and tests/gpu/test_gpu_reference (every backend and precision). */
#ifndef ESMT_TEST_REFERENCE_FIXTURE_H
#define ESMT_TEST_REFERENCE_FIXTURE_H

#include <stdint.h>

#include "esmtrain/esmtrain.h"
#include "safetensors.h"

typedef struct fixture {
  esmt_st_file file;
  esmt_model_config cfg;
  int B, T;
  double lr, beta1, beta2, eps, wd; /* the optimizer's (eps: AdamW only) */
  int lion;                         /* 1: a make_lion_fixture.py fixture */
} fixture;

/* The committed fixtures: "tiny_hd16", "small_hd64". */
extern const char *const k_fixtures[2];

void load_fixture(const char *name, fixture *fx);
const esmt_st_tensor *need(const fixture *fx, const char *name);
/* ||a - b|| / ||b|| over n values (b is the float64 reference). */
double rel_err(const float *a, const double *b, uint64_t n);
void load_weights(esmt_model *m, const fixture *fx);
int32_t *load_i32(const fixture *fx, const char *name); /* malloc'ed [B*T] */
/* Compare every tensor of buffer `which` with "<prefix><name>"; fails the
 * test above tol; returns the worst relative error. */
double compare_all(esmt_model *m, const fixture *fx, esmt_buffer which, const char *prefix,
                   double tol, const char *what);

#endif
