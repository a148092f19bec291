/* SPDX-License-Identifier: MIT */
/* The model's linear maps, y = x W^T + b, forward (GELU fused when asked)
 * and backward, as backend gemm and bias_grad calls: the encoder's layers
 * (model_forward.c, model_backward.c) and the task head (model_head.c)
 * share them. Activations are in the compute dtype, weights come from
 * esmt_weight (the half copy when there is one), gradients accumulate in
 * fp32. */
#include "esmtrain/backend.h"
#include "model.h"

#define G(off) esmt_grad(m, (off))

/* y[N,out] = x[N,in] . W[out,in]^T + b, optionally GELU (pre-activation kept). */
esmt_status esmt_model_linear_gelu(esmt_model *m, const void *x, uint64_t w, uint64_t b, void *y,
                                    int N, int in, int out, void *gelu_pre, const char *where) {
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = m->dtype;
  g.trans_b = 1;
  g.m = N; g.n = out; g.k = in;
  g.alpha = 1.0f;
  g.a = x; g.lda = in;
  g.b = esmt_weight(m, w); g.ldb = in;
  g.c = y; g.ldc = out;
  g.bias = esmt_weight(m, b);
  g.epilogue = gelu_pre ? ESMTB_EPI_GELU : ESMTB_EPI_NONE;
  g.pre = gelu_pre;
  ESMT_OP(m, gemm, g, where);
  return ESMT_OK;
}

esmt_status esmt_model_linear(esmt_model *m, const void *x, uint64_t w, uint64_t b, void *y,
                              int N, int in, int out, const char *where) {
  return esmt_model_linear_gelu(m, x, w, b, y, N, in, out, NULL, where);
}

/* For y = x W^T + b with W [out,in]: dx (=|+=) dy W, dW += dy^T x, db += sum dy. */
esmt_status esmt_model_linear_backward_with(esmt_model *m, const void *x, uint64_t w, uint64_t b,
                                             const void *dy, void *dx, int N, int in, int out,
                                             int frozen, const char *where) {
  esmtb_gemm_args g = {0};
  g.struct_size = sizeof g;
  g.dtype = m->dtype;
  g.alpha = 1.0f;
  /* dx[N,in] = dy[N,out] . W[out,in] */
  g.m = N; g.n = in; g.k = out;
  g.a = dy; g.lda = out;
  g.b = esmt_weight(m, w); g.ldb = in;
  g.c = dx; g.ldc = in;
  ESMT_OP(m, gemm, g, where);
  if (frozen) return ESMT_OK; /* the map itself gets no gradient */
  /* dW[out,in] += dy^T[out,N] . x[N,in] */
  esmtb_gemm_args gw = {0};
  gw.struct_size = sizeof gw;
  gw.dtype = m->dtype;
  gw.trans_a = 1;
  gw.m = out; gw.n = in; gw.k = N;
  gw.alpha = 1.0f; gw.beta = 1.0f;
  gw.a = dy; gw.lda = out;
  gw.b = x; gw.ldb = in;
  gw.c = G(w); gw.ldc = in;
  gw.c_f32 = m->dtype != ESMTB_F32; /* half inputs, fp32 gradient (ABI 1.1, checked at create) */
  ESMT_OP(m, gemm, gw, where);
  esmtb_bias_grad_args bg = {sizeof bg, m->dtype, N, out, dy, G(b)};
  ESMT_OP(m, bias_grad, bg, where);
  return ESMT_OK;
}

/* The task head's maps, which always train. */
esmt_status esmt_model_linear_backward(esmt_model *m, const void *x, uint64_t w, uint64_t b,
                                       const void *dy, void *dx, int N, int in, int out,
                                       const char *where) {
  return esmt_model_linear_backward_with(m, x, w, b, dy, dx, N, in, out, 0, where);
}
