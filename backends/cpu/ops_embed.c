/* SPDX-License-Identifier: MIT */
/* CPU kernels: token embedding with ESM-2 token dropout, and its backward.
 * E, out and dout are in the args' dtype (half rows go through fp32
 * scratch, cpu_half.h); row_scale and dE are fp32. With packed segments
 * (ABI 1.3) the dropout scale is per segment and tokens in no segment are
 * padding. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_half.h"
#include "cpu_segs.h"

static int valid(const esmtb_embed_args *a) {
  return a && a->tokens && a->E && a->row_scale && a->B > 0 && a->T > 0 && a->d > 0;
}

/* The vocabulary size is not passed, so only negative ids can be caught. */
static int first_negative(const esmtb_embed_args *a) {
  for (int r = 0; r < a->B * a->T; r++)
    if (a->tokens[r] < 0) return r;
  return -1;
}

static float dropout_scale(const esmtb_embed_args *a, int nonpad, int masked) {
  double observed = nonpad ? (double)masked / nonpad : 0.0;
  return (float)((1.0 - (double)a->mask_ratio_train) / (1.0 - observed));
}

/* The argument copy (fields past struct_size zeroed), checked; *owner gets
 * the token -> segment map for packed rows (NULL otherwise). */
static esmtb_status prepare(const esmtb_embed_args *user, int backward, esmtb_embed_args *a,
                            int32_t **owner) {
  const char *op = backward ? "embed_backward" : "embed_forward";
  *owner = NULL;
  if (!user) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: bad arguments", op);
  cpu_args_copy(a, sizeof *a, user, user->struct_size);
  if (!valid(a) || (backward ? !a->dout || !a->dE : !a->out))
    return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: bad arguments", op);
  CPU_REQUIRE_ACT(a->dtype, op);
  const int bad = first_negative(a);
  if (bad >= 0) return cpu_fail(ESMTB_ERR_INVALID_ARGUMENT, "cpu %s: token %d is %d", op, bad, a->tokens[bad]);
  if (a->segs.nseg <= 0) return 0;
  esmtb_status rc = cpu_segs_check(&a->segs, a->B, a->T, op);
  if (rc) return rc;
  if (!(*owner = cpu_segs_owner(&a->segs, a->B, a->T)))
    return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu %s: out of memory", op);
  return 0;
}

/* The dropout scale of token r, or 0 when it gets no embedding (mask, pad,
 * or outside every segment). */
static inline float token_scale(const esmtb_embed_args *a, const int32_t *owner, int r) {
  const int32_t id = a->tokens[r];
  if (id == a->mask_id || id == a->pad_id) return 0.0f;
  if (!owner) return a->row_scale[r / a->T];
  return owner[r] < 0 ? 0.0f : a->row_scale[owner[r]];
}

esmtb_status cpu_embed_forward(esmtb_device *dev, const esmtb_embed_args *user, esmtb_stream *s) {
  (void)s;
  esmtb_embed_args args;
  int32_t *owner;
  esmtb_status rc = prepare(user, 0, &args, &owner);
  if (rc) return rc;
  const esmtb_embed_args *a = &args;
  const int B = a->B, T = a->T, d = a->d;
  const int32_t *tok = a->tokens;
  const esmtb_dtype dt = a->dtype;
  /* s_b = (1 - ratio_train) / (1 - masked_b / nonpad_b), cls/eos counted;
   * over each segment when packed. */
  for (int i = 0; i < a->segs.nseg; i++) {
    int masked = 0;
    for (int k = 0; k < a->segs.len[i]; k++) masked += tok[a->segs.start[i] + k] == a->mask_id;
    a->row_scale[i] = dropout_scale(a, a->segs.len[i], masked);
  }
  for (int b = 0; b < B && !owner; b++) {
    int nonpad = 0, masked = 0;
    for (int t = 0; t < T; t++) {
      nonpad += tok[b * T + t] != a->pad_id;
      masked += tok[b * T + t] == a->mask_id;
    }
    a->row_scale[b] = dropout_scale(a, nonpad, masked);
  }
  const size_t per = 2 * (size_t)d; /* one row of E and one of out */
  float *scratch = dt == ESMTB_F32 ? NULL : cpu_scratch_alloc(dev->num_threads, per);
  if (dt != ESMTB_F32 && !scratch) {
    free(owner);
    return cpu_fail(ESMTB_ERR_OUT_OF_MEMORY, "cpu embed_forward: out of memory");
  }
#pragma omp parallel num_threads(dev->num_threads)
  {
    float *te = scratch ? cpu_scratch_slice(scratch, per, omp_get_thread_num()) : NULL;
    float *to = te ? te + d : NULL;
#pragma omp for schedule(static)
    for (int r = 0; r < B * T; r++) {
      const int32_t id = tok[r];
      const float sc = token_scale(a, owner, r);
      if (sc == 0.0f) {
        cpu_zero(a->out, dt, (size_t)r * d, (size_t)d);
        continue;
      }
      const float *e = cpu_in(a->E, dt, (size_t)id * d, d, te);
      float *o = cpu_out(a->out, dt, (size_t)r * d, to);
#pragma omp simd
      for (int c = 0; c < d; c++) o[c] = e[c] * sc;
      cpu_out_done(a->out, dt, (size_t)r * d, to, d);
    }
  }
  free(scratch);
  free(owner);
  return 0;
}

/* Each thread owns a slice of columns of dE, so the scatter-add needs no
 * atomics and sums in row order (deterministic). */
CPU_FORCE_INLINE void embed_backward_cols(esmtb_dtype dt, const esmtb_embed_args *a,
                                          const int32_t *owner, int c0, int c1) {
  const int T = a->T, d = a->d;
  for (int r = 0; r < a->B * T; r++) {
    const int32_t id = a->tokens[r];
    const float sc = token_scale(a, owner, r);
    if (sc == 0.0f) continue;
    float tmp[32];
    const float *g = cpu_in(a->dout, dt, (size_t)r * d + c0, c1 - c0, tmp);
    float *row = a->dE + (size_t)id * d + c0;
#pragma omp simd
    for (int c = 0; c < c1 - c0; c++) row[c] += g[c] * sc;
  }
}

esmtb_status cpu_embed_backward(esmtb_device *dev, const esmtb_embed_args *user,
                                esmtb_stream *s) {
  (void)s;
  esmtb_embed_args args;
  int32_t *owner;
  esmtb_status rc = prepare(user, 1, &args, &owner);
  if (rc) return rc;
  const esmtb_embed_args *a = &args;
  const int d = a->d, block = 32, nblocks = (d + block - 1) / block;
  const esmtb_dtype dt = a->dtype;
#pragma omp parallel for num_threads(dev->num_threads) schedule(static)
  for (int bi = 0; bi < nblocks; bi++) {
    const int c0 = bi * block, c1 = c0 + block < d ? c0 + block : d;
    CPU_BY_DTYPE(dt, embed_backward_cols, a, owner, c0, c1);
  }
  free(owner);
  return 0;
}
