/* SPDX-License-Identifier: MIT */
/* Packed rows (ABI 1.3 esmtb_segments) on the CPU backend: the embedding
 * and attention ops on packed segments give exactly the bits of each
 * sequence run alone as a right-padded row (the right-padded ops are
 * checked against float64 references in test_cpu_ops.c), padding gets
 * zeros over NaN-poisoned buffers, and bad segments are refused. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops_common.h" /* the opened cpu.so, random data */

static float *nanf_buf(size_t n) {
  float *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = NAN;
  return v;
}
static void assert_all_zero(const float *x, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++)
    if (x[i] != 0.0f || signbit(x[i])) fail_msg("%s: element %zu is %g, not +0", what, i, x[i]);
}

/* The packing every case uses: 2 rows of T = 24 with a trailing gap, a
 * leading gap and a segment of one token. */
enum { PT = 24, PB = 2, NSEG = 5 };
static const int32_t seg_start[NSEG] = {0, 7, 20, 26, 46};
static const int32_t seg_len[NSEG] = {7, 13, 1, 20, 2};

static esmtb_segments packed_segs(void) {
  esmtb_segments s = {NSEG, 20, seg_start, seg_len};
  return s;
}
static int owner_of(int r) {
  for (int s = 0; s < NSEG; s++)
    if (r >= seg_start[s] && r < seg_start[s] + seg_len[s]) return s;
  return -1;
}

/* ---- attention ---- */

static void rope_tables(int T, int hd, float **cs, float **sn) {
  const int half = hd / 2;
  *cs = malloc(sizeof(float) * T * half);
  *sn = malloc(sizeof(float) * T * half);
  assert_true(*cs && *sn);
  for (int t = 0; t < T; t++)
    for (int i = 0; i < half; i++) {
      double ang = t * pow(10000.0, -2.0 * i / hd);
      (*cs)[t * half + i] = (float)cos(ang);
      (*sn)[t * half + i] = (float)sin(ang);
    }
}

/* Activations in dtype dt: random values (fp32, or half bit patterns of
 * magnitude 1/4..2), NaN poison, and the +0 check, by element size. */
static size_t esz(esmtb_dtype dt) { return dt == ESMTB_F32 ? 4 : 2; }
static void *rand_act(esmtb_dtype dt, size_t n) {
  if (dt == ESMTB_F32) return randf(n, 1.5);
  uint16_t *h = malloc(n * sizeof *h);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) {
    const unsigned sign = urand() < 0, m = (unsigned)((urand() + 1) * 60);
    if (dt == ESMTB_BF16) h[i] = (uint16_t)(sign << 15 | (125u + m % 3) << 7 | (m & 0x7F));
    else h[i] = (uint16_t)(sign << 15 | (13u + m % 3) << 10 | (m * 7 & 0x3FF));
  }
  return h;
}
static void *nan_act(esmtb_dtype dt, size_t n) {
  if (dt == ESMTB_F32) return nanf_buf(n);
  uint16_t *h = malloc(n * sizeof *h);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) h[i] = dt == ESMTB_BF16 ? 0x7FC0 : 0x7E00;
  return h;
}
static void assert_bytes_zero(const void *p, size_t bytes, const char *what) {
  const unsigned char *c = p;
  for (size_t i = 0; i < bytes; i++)
    if (c[i]) fail_msg("%s: byte %zu is %u, not 0", what, i, c[i]);
}

static void attention_packed_case(esmtb_dtype dt, int H, int hd) {
  const int D = H * hd, T = PT;
  const size_t Np = (size_t)PB * T, Nu = (size_t)NSEG * T, es = esz(dt);
  float *cs, *sn;
  rope_tables(T, hd, &cs, &sn);
  /* packed inputs; the unpacked batch holds segment s alone in row s */
  char *qkv = rand_act(dt, Np * 3 * D), *dout = rand_act(dt, Np * D);
  char *uqkv = rand_act(dt, Nu * 3 * D), *udout = rand_act(dt, Nu * D);
  int32_t ulen[NSEG];
  for (int s = 0; s < NSEG; s++) {
    ulen[s] = seg_len[s];
    memcpy(uqkv + (size_t)s * T * 3 * D * es, qkv + (size_t)seg_start[s] * 3 * D * es,
           (size_t)seg_len[s] * 3 * D * es);
    memcpy(udout + (size_t)s * T * D * es, dout + (size_t)seg_start[s] * D * es,
           (size_t)seg_len[s] * D * es);
  }
  char *out = nan_act(dt, Np * D), *dqkv = nan_act(dt, Np * 3 * D);
  char *uout = nan_act(dt, Nu * D), *udqkv = nan_act(dt, Nu * 3 * D);
  float *lse = nanf_buf(Np * H), *ulse = nanf_buf(Nu * H);

  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = dt; a.B = PB; a.T = T; a.H = H; a.hd = hd;
  a.scale = 1.0f / sqrtf((float)hd); a.seq_len = NULL; /* ignored when packed */
  a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = out; a.lse = lse; a.dout = dout; a.dqkv = dqkv;
  a.segs = packed_segs();
  esmtb_attention_args u = a;
  u.B = NSEG; u.seq_len = ulen; u.segs.nseg = 0;
  u.qkv = uqkv; u.out = uout; u.lse = ulse; u.dout = udout; u.dqkv = udqkv;

  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  assert_int_equal(ops->attention_backward(dev, &a, NULL), 0);
  assert_int_equal(ops->attention_forward(dev, &u, NULL), 0);
  assert_int_equal(ops->attention_backward(dev, &u, NULL), 0);
  char what[96];
  for (int r = 0; r < PB * T; r++) {
    const int s = owner_of(r), b = r / T, t = r % T;
    snprintf(what, sizeof what, "dtype %d H=%d hd=%d token %d (segment %d)", (int)dt, H, hd, r, s);
    if (s < 0) { /* padding: zeros over the NaNs */
      assert_bytes_zero(out + (size_t)r * D * es, (size_t)D * es, what);
      assert_bytes_zero(dqkv + (size_t)r * 3 * D * es, 3 * (size_t)D * es, what);
      for (int h = 0; h < H; h++) assert_all_zero(lse + ((size_t)b * H + h) * T + t, 1, what);
      continue;
    }
    const int k = r - seg_start[s]; /* its row in the unpacked batch */
    const size_t ur = (size_t)s * T + k;
    if (memcmp(out + (size_t)r * D * es, uout + ur * D * es, (size_t)D * es))
      fail_msg("%s: out differs from the sequence run alone", what);
    if (memcmp(dqkv + (size_t)r * 3 * D * es, udqkv + ur * 3 * D * es, 3 * (size_t)D * es))
      fail_msg("%s: dqkv differs from the sequence run alone", what);
    for (int h = 0; h < H; h++)
      if (lse[((size_t)b * H + h) * T + t] != ulse[((size_t)s * H + h) * T + k])
        fail_msg("%s: lse of head %d differs", what, h);
  }
  for (size_t i = 0; i < Np * H; i++) assert_true(isfinite(lse[i]));
  /* one thread: the same bits (work splits by (segment, head) only) */
  char *out1 = nan_act(dt, Np * D), *dqkv1 = nan_act(dt, Np * 3 * D);
  float *lse1 = nanf_buf(Np * H);
  a.out = out1; a.lse = lse1; a.dqkv = dqkv1;
  assert_int_equal(ops->attention_forward(dev1, &a, NULL), 0);
  assert_int_equal(ops->attention_backward(dev1, &a, NULL), 0);
  assert_memory_equal(out1, out, Np * D * es);
  assert_memory_equal(lse1, lse, Np * H * sizeof *lse);
  assert_memory_equal(dqkv1, dqkv, Np * 3 * D * es);
  free(cs); free(sn); free(qkv); free(dout); free(uqkv); free(udout); free(out); free(lse);
  free(dqkv); free(uout); free(ulse); free(udqkv); free(out1); free(lse1); free(dqkv1);
}

static void test_attention_packed(void **state) {
  (void)state;
  attention_packed_case(ESMTB_F32, 2, 16);
  attention_packed_case(ESMTB_F32, 3, 24); /* hd not a multiple of the vector width */
  attention_packed_case(ESMTB_F32, 1, 64);
}

/* F16/BF16 activations take the staging path of the head kernels. */
static void test_attention_packed_half(void **state) {
  (void)state;
  attention_packed_case(ESMTB_BF16, 2, 16);
  attention_packed_case(ESMTB_F16, 3, 24);
}

/* An args struct from before ABI 1.3 (struct_size without segs) reads as
 * right-padded whatever lies past it. */
static void test_attention_old_struct(void **state) {
  (void)state;
  const int H = 2, hd = 16, D = H * hd, T = 8;
  float *cs, *sn;
  rope_tables(T, hd, &cs, &sn);
  const int32_t len[1] = {T};
  float *qkv = randf((size_t)T * 3 * D, 1.0), *o1 = nanf_buf((size_t)T * D);
  float *o2 = nanf_buf((size_t)T * D), *lse = nanf_buf((size_t)T * H);
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = ESMTB_F32; a.B = 1; a.T = T; a.H = H; a.hd = hd;
  a.scale = 0.25f; a.seq_len = len; a.rope_cos = cs; a.rope_sin = sn;
  a.qkv = qkv; a.out = o1; a.lse = lse;
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  const int32_t bogus = 3;
  a.struct_size = (uint32_t)offsetof(esmtb_attention_args, segs);
  a.segs.nseg = 1; a.segs.max_len = 3; a.segs.start = &bogus; a.segs.len = &bogus;
  a.out = o2;
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0);
  assert_memory_equal(o1, o2, (size_t)T * D * sizeof *o1);
  free(cs); free(sn); free(qkv); free(o1); free(o2); free(lse);
}

/* ---- embedding ---- */


static void embed_packed_case(esmtb_dtype dt) {
  const int d = 40, T = PT;
  const size_t Np = (size_t)PB * T, Nu = (size_t)NSEG * T, es = esz(dt);
  /* packed tokens: cls .. eos per segment with some masks; gap tokens are
   * PAD except one non-pad token, which must count as padding too */
  int32_t tok[PB * PT], utok[NSEG * PT];
  for (int r = 0; r < PB * T; r++) {
    const int s = owner_of(r);
    if (s < 0) {
      tok[r] = r == 21 ? 7 : PAD;
      continue;
    }
    const int k = r - seg_start[s];
    tok[r] = k == 0 ? 0 : k == seg_len[s] - 1 ? 2 : (r % 5 == 0 ? MASK : 4 + r % 20);
  }
  for (int i = 0; i < NSEG * T; i++) utok[i] = PAD;
  for (int s = 0; s < NSEG; s++)
    memcpy(utok + (size_t)s * T, tok + seg_start[s], (size_t)seg_len[s] * sizeof *tok);
  char *E = rand_act(dt, (size_t)VOCAB * d), *dout = rand_act(dt, Np * d);
  char *udout = rand_act(dt, Nu * d);
  for (int s = 0; s < NSEG; s++)
    memcpy(udout + (size_t)s * T * d * es, dout + (size_t)seg_start[s] * d * es,
           (size_t)seg_len[s] * d * es);
  char *out = nan_act(dt, Np * d), *uout = nan_act(dt, Nu * d);
  float *scale = nanf_buf(NSEG), *uscale = nanf_buf(NSEG);
  float *dE = calloc((size_t)VOCAB * d, sizeof *dE), *udE = calloc((size_t)VOCAB * d, sizeof *udE);
  assert_true(dE && udE);
  esmtb_embed_args a = {0};
  a.struct_size = sizeof a; a.dtype = dt; a.B = PB; a.T = T; a.d = d;
  a.tokens = tok; a.E = E; a.out = out; a.row_scale = scale;
  a.mask_id = MASK; a.pad_id = PAD; a.mask_ratio_train = 0.12f;
  a.dout = dout; a.dE = dE;
  a.segs = packed_segs();
  esmtb_embed_args u = a;
  u.B = NSEG; u.tokens = utok; u.out = uout; u.row_scale = uscale; u.dout = udout; u.dE = udE;
  u.segs.nseg = 0;
  assert_int_equal(ops->embed_forward(dev, &a, NULL), 0);
  assert_int_equal(ops->embed_backward(dev, &a, NULL), 0);
  assert_int_equal(ops->embed_forward(dev, &u, NULL), 0);
  assert_int_equal(ops->embed_backward(dev, &u, NULL), 0);
  /* the per-segment scale is the one the sequence gets alone */
  assert_memory_equal(scale, uscale, NSEG * sizeof *scale);
  assert_true(fabsf(scale[2] - 0.88f) < 1e-6f); /* a lone <cls>: nothing masked */
  for (int r = 0; r < PB * T; r++) {
    const int s = owner_of(r);
    char what[64];
    snprintf(what, sizeof what, "embed dtype %d token %d", (int)dt, r);
    if (s < 0) {
      assert_bytes_zero(out + (size_t)r * d * es, (size_t)d * es, what);
      continue;
    }
    const size_t ur = (size_t)s * T + (size_t)(r - seg_start[s]);
    if (memcmp(out + (size_t)r * d * es, uout + ur * d * es, (size_t)d * es))
      fail_msg("%s: differs from the sequence embedded alone", what);
  }
  /* dE: the same sums in the same order; the gap's token 7 adds nothing */
  assert_memory_equal(dE, udE, (size_t)VOCAB * d * sizeof *dE);
  free(E); free(dout); free(udout); free(out); free(uout); free(scale); free(uscale);
  free(dE); free(udE);
}

static void test_embed_packed(void **state) {
  (void)state;
  embed_packed_case(ESMTB_F32);
  embed_packed_case(ESMTB_BF16);
  embed_packed_case(ESMTB_F16);
}

/* ---- refused segments ---- */

#define EXPECT_FAIL(call, word)                                                   \
  do {                                                                            \
    assert_int_not_equal((call), 0);                                              \
    if (!strstr(test_backend_error(), word))                                      \
      fail_msg("%s: message '%s' lacks '%s'", #call, test_backend_error(), word); \
  } while (0)

static void test_bad_segments(void **state) {
  (void)state;
  const int H = 1, hd = 16, D = H * hd, T = 8;
  float *cs, *sn;
  rope_tables(T, hd, &cs, &sn);
  float *qkv = randf((size_t)2 * T * 3 * D, 1.0), *out = nanf_buf((size_t)2 * T * D);
  float *lse = nanf_buf((size_t)2 * T * H);
  int32_t tok[16] = {0}, start[2], len[2];
  float scale[2], E[VOCAB * 4] = {0}, eout[16 * 4];
  esmtb_attention_args a = {0};
  a.struct_size = sizeof a; a.dtype = ESMTB_F32; a.B = 2; a.T = T; a.H = H; a.hd = hd;
  a.scale = 0.25f; a.rope_cos = cs; a.rope_sin = sn; a.qkv = qkv; a.out = out; a.lse = lse;
  a.segs.nseg = 2; a.segs.max_len = 8; a.segs.start = start; a.segs.len = len;
  esmtb_embed_args e = {0};
  e.struct_size = sizeof e; e.dtype = ESMTB_F32; e.B = 2; e.T = T; e.d = 4; e.tokens = tok;
  e.E = E; e.out = eout; e.row_scale = scale; e.mask_id = MASK; e.pad_id = PAD;
  e.segs = a.segs;
  start[0] = 6; len[0] = 4; start[1] = 12; len[1] = 2; /* crosses the row boundary */
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), "inside one row");
  EXPECT_FAIL(ops->embed_forward(dev, &e, NULL), "inside one row");
  start[0] = 0; len[0] = 5; start[1] = 4; len[1] = 2; /* overlapping */
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), "segment 1");
  start[0] = 0; len[0] = 0; /* empty */
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), "segment 0");
  start[0] = 0; len[0] = 3; start[1] = 8; len[1] = 8; a.segs.max_len = 4; /* max_len too small */
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), "max_len");
  a.segs.max_len = 8; a.segs.len = NULL;
  EXPECT_FAIL(ops->attention_forward(dev, &a, NULL), "NULL");
  a.segs.len = len;
  assert_int_equal(ops->attention_forward(dev, &a, NULL), 0); /* and the fixed one runs */
  assert_true((ops->caps & ESMTB_CAP_VARLEN) != 0);
  free(cs); free(sn); free(qkv); free(out); free(lse);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attention_packed),
      cmocka_unit_test(test_attention_packed_half),
      cmocka_unit_test(test_attention_old_struct),
      cmocka_unit_test(test_embed_packed),
      cmocka_unit_test(test_bad_segments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
