/* SPDX-License-Identifier: MIT */
/* The harness of test_gpu_ops: the GPU backends under test and cpu.so,
 * host helpers (random inputs, fp16/bf16 rounding, relative error), device
 * helpers (allocate, copy in and out in a dtype) and the RESULT lines each
 * check prints. Shared by test_gpu_ops.c (gemm, embed, layernorm, the
 * reductions, errors, main), gpu_ops_elementwise.c (add, dropout,
 * gelu_backward, convert, scale) and gpu_ops_optimizer.c (AdamW, Lion). */
#ifndef ESMT_TEST_GPU_OPS_HARNESS_H
#define ESMT_TEST_GPU_OPS_HARNESS_H

#include "test_util.h"

#include <stdint.h>
#include <stdio.h>

#include "ops_table.h"

typedef struct gpu {
  const char *name;
  const esmtb_ops *ops;
  esmtb_device *dev;
  esmtb_stream *st;
} gpu;

extern const esmtb_ops *cpu;
extern esmtb_device *cdev;
extern gpu g_gpus[2];
extern int g_ngpu;
extern int g_failed;

/* Failed checks so far: a check prints its line and counts a failure, and
 * each test fails at its end (CHECKS_END), so one bad op does not hide the
 * measurements of the others from the log. */
#define CHECKS_BEGIN() const int failed0_ = g_failed
#define CHECKS_END()                                                         \
  do {                                                                       \
    if (g_failed != failed0_) fail_msg("%d check(s) failed", g_failed - failed0_); \
  } while (0)

/* Loop over (GPU backend, activation dtype it claims), binding g and dt. */
#define FOR_EACH_GPU_DTYPE(g, dt)                                                      \
  for (int gi_ = 0; gi_ < g_ngpu; gi_++)                                                \
    for (int di_ = 0; di_ < 3; di_++)                                                   \
      for (int once_ = has_dtype(&g_gpus[gi_], (esmtb_dtype)di_); once_; once_ = 0)     \
        for (const gpu *g = &g_gpus[gi_]; once_; once_ = 0)                             \
          for (esmtb_dtype dt = (esmtb_dtype)di_; once_; once_ = 0)

double urand(void);
float *randf(size_t n, double scale, double offset);
float *copyf(const float *x, size_t n);
float h2f(uint16_t h);
uint16_t f2h(float f);
float bf2f(uint16_t h);
uint16_t f2bf(float f);
void round_tf32(float *x, size_t n);
const char *dt_name(esmtb_dtype dt);
size_t dt_size(esmtb_dtype dt);
double dt_tol(esmtb_dtype dt);
void round_to(float *x, size_t n, esmtb_dtype dt);
double relerr(const float *got, const float *ref, size_t n);
void report(const gpu *g, const char *what, esmtb_dtype dt, double err, double tol);
void report_bits(const gpu *g, const char *what, esmtb_dtype dt, const void *x, const void *y, size_t bytes);
/* A check that expects the GPU's output to be the CPU backend's bit for bit. */
void report_same(const gpu *g, const char *what, esmtb_dtype dt, const void *cpu_out,
                 const void *gpu_out, size_t bytes);
void gsync(const gpu *g);
void *galloc(const gpu *g, size_t bytes);
void gfree(const gpu *g, void *p);
void gput_raw(const gpu *g, void *d, const void *h, size_t bytes);
void gget_raw(const gpu *g, void *h, const void *d, size_t bytes);
void gput(const gpu *g, void *d, const float *x, size_t n, esmtb_dtype dt);
void *gup(const gpu *g, const float *x, size_t n, esmtb_dtype dt);
float *gdown(const gpu *g, const void *d, size_t n, esmtb_dtype dt);
void cpu_ok(esmtb_status st, const char *op);
void gpu_ok(const gpu *g, esmtb_status st, const char *op);
int has_dtype(const gpu *g, esmtb_dtype dt);

/* The element-wise ops' tests (gpu_ops_elementwise.c). */
void test_add(void **state);
void test_dropout(void **state);
void test_gelu_backward(void **state);
void test_convert_scale(void **state);
/* The optimizer tests (gpu_ops_optimizer.c). */
void test_adamw(void **state);
void test_lion(void **state);

#endif
