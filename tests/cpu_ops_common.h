/* SPDX-License-Identifier: MIT */
/* What the cpu backend's op tests share (test_cpu_ops: fp32 and argument
 * errors; test_cpu_ops_half: F16/BF16 activations): the opened backend,
 * random data, float64 references of the ops and the gradient checks
 * against them. */
#ifndef ESMT_TEST_CPU_OPS_COMMON_H
#define ESMT_TEST_CPU_OPS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "esmtrain/backend.h"
#include "ops_table.h"

/* A float64 reference loss L(x) = sum(r * f(x)). */
typedef double (*ref_loss)(void *ctx, const double *x);

enum { PAD = 1, MASK = 32, VOCAB = 33 };

typedef struct emb_ctx { int B, T, d; const int32_t *tok; const double *r; } emb_ctx;
typedef struct ln_ctx { int N, d, wrt; const double *x, *w, *b, *r; } ln_ctx;
typedef struct att_ctx {
  int B, T, H, hd;
  double scale;
  const int32_t *len;
  const float *cs, *sn; /* [T, hd/2] */
  const double *r;      /* [B*T, H*hd] */
} att_ctx;
typedef struct xe_ctx { int N, V; const int32_t *lab; double gs; } xe_ctx;

extern const esmtb_ops *ops; /* cpu.so */
extern esmtb_device *dev;     /* 2 threads */
extern esmtb_device *dev1;    /* 1 thread */
int setup(void **state); /* cmocka group setup/teardown: opens/closes cpu.so */
int teardown(void **state);
double urand(void);
float *randf(size_t n, double scale);
double *to_d(const float *x, size_t n);
float *zerof(size_t n);
double *zerod(size_t n);
double dotfd(const float *a, const double *b, size_t n);
double dotdd(const double *a, const double *b, size_t n);
void expect_close(const float *got, const double *ref, size_t n, double tol,
                         const char *what);
void check_grad(ref_loss f, void *ctx, const double *x, size_t n, const float *g,
                       const size_t *pick, int nsample, double tol, const char *what);
double gelu_d(double x);
uint16_t bits16(const void *p, size_t i);
uint16_t ref_f16(float f);
uint16_t ref_bf16(float f);
int is_nan16(uint16_t h, int bf);
void emb_ref(const emb_ctx *k, const double *E, double *out, double *scale);
double emb_loss(void *c, const double *E);
void ln_ref(int N, int d, const double *x, const double *w, const double *b, double *out,
                   double *mean, double *rstd);
double ln_loss(void *c, const double *p);
void att_ref(const att_ctx *k, const double *qkv, double *out, double *lse);
double att_loss(void *c, const double *qkv);
double xe_ref(const xe_ctx *k, const double *z, double *grad);
double xe_loss(void *c, const double *z);

#endif
