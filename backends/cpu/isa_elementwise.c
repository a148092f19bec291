/* Elementwise and row kernels, compiled once per instruction set (see
 * isa_kernels.h). Plain loops written for the vectoriser. */
#include <math.h>
#include <string.h>

#include "cpu_math.h"
#include "isa_kernels.h"

static void gelu(float *x, float *pre, long n) {
  if (pre) memcpy(pre, x, (size_t)n * sizeof *x);
#pragma omp simd
  for (long i = 0; i < n; i++) x[i] = cpu_gelu(x[i]);
}

static void gelu_backward(const float *pre, const float *dout, float *dpre, long n) {
#pragma omp simd
  for (long i = 0; i < n; i++) dpre[i] = dout[i] * cpu_gelu_grad(pre[i]);
}

static void add(const float *a, const float *b, float *y, long n) {
#pragma omp simd
  for (long i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static void layernorm_row(const float *x, const float *w, const float *b, float *o, int d,
                          float eps, float *mean_out, float *rstd_out) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < d; c++) sum += x[c];
  const float mean = sum / (float)d;
  float var = 0.0f; /* two passes: no cancellation */
#pragma omp simd reduction(+ : var)
  for (int c = 0; c < d; c++) var += (x[c] - mean) * (x[c] - mean);
  const float rstd = 1.0f / sqrtf(var / (float)d + eps);
#pragma omp simd
  for (int c = 0; c < d; c++) o[c] = (x[c] - mean) * rstd * w[c] + b[c];
  *mean_out = mean;
  *rstd_out = rstd;
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w. */
static void layernorm_back_row(const float *x, const float *w, const float *dout, float mean,
                               float rstd, float *dx, int accumulate, float *dw, float *db, int d) {
  float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
  for (int c = 0; c < d; c++) {
    float xhat = (x[c] - mean) * rstd;
    float gw = dout[c] * w[c];
    sg += gw;
    sgx += gw * xhat;
    dw[c] += dout[c] * xhat;
    db[c] += dout[c];
  }
  sg /= (float)d;
  sgx /= (float)d;
  if (accumulate) {
#pragma omp simd
    for (int c = 0; c < d; c++) dx[c] += rstd * (dout[c] * w[c] - sg - (x[c] - mean) * rstd * sgx);
  } else {
#pragma omp simd
    for (int c = 0; c < d; c++) dx[c] = rstd * (dout[c] * w[c] - sg - (x[c] - mean) * rstd * sgx);
  }
}

static void adamw(float *p, const float *g, float *m, float *v, long n, const cpu_adamw_consts *k) {
  const float b1 = k->b1, b2 = k->b2, eps = k->eps, gs = k->gs, step = k->step_size;
  const float isb = k->inv_sqrt_bc2, decay = k->decay;
#pragma omp simd
  for (long i = 0; i < n; i++) {
    float gi = g[i] * gs;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (sqrtf(vi) * isb + eps);
  }
}

const cpu_isa_elementwise ISA_SYMBOL(cpu_isa_elementwise) = {
    gelu, gelu_backward, add, layernorm_row, layernorm_back_row, adamw,
};
