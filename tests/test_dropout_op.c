/* SPDX-License-Identifier: MIT */
/* The dropout op (esmtb_dropout_args, ABI 2.3) and its generator
 * (esmtrain/philox.h): Philox4x32-10 against Random123's published
 * known-answer vectors; cpu.so's op against the header's element-by-element
 * mask, whatever the thread count, offset or dtype; inverted scaling; the
 * kept fraction; accumulate; and a destination that may hold anything. */
#include "test_util.h"
#include "cpu_ops_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/philox.h"

/* Random123 1.14, examples/kat_vectors: philox4x32 10 (counter, key, result). */
static void test_philox_known_answers(void **state) {
  (void)state;
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int v = 0; v < 3; v++) {
    uint32_t c[4] = {kat[v][0], kat[v][1], kat[v][2], kat[v][3]};
    esmt_philox4x32_10(&c[0], &c[1], &c[2], &c[3], kat[v][4], kat[v][5]);
    for (int i = 0; i < 4; i++)
      if (c[i] != kat[v][6 + i])
        fail_msg("vector %d word %d: %08x, expected %08x", v, i, c[i], kat[v][6 + i]);
  }
  /* the element layout: word i mod 4 of counter {i / 4, 0, stream, stream >> 32} */
  uint32_t w[4];
  esmt_philox_words(0xa4093822299f31d0ull, 0, 0, w);
  uint32_t c[4] = {0, 0, 0, 0};
  esmt_philox4x32_10(&c[0], &c[1], &c[2], &c[3], 0x299f31d0u, 0xa4093822u);
  assert_memory_equal(w, c, sizeof w);
  assert_int_equal(esmt_dropout_threshold(0.0), 0);
  assert_int_equal(esmt_dropout_threshold(0.5), 0x80000000u);
  assert_int_equal(esmt_dropout_threshold(1.0), 0xffffffffu);
}

static esmtb_dropout_args args(size_t n, const void *x, void *y, double p, int accumulate) {
  esmtb_dropout_args a = {0};
  a.struct_size = sizeof a;
  a.dtype = ESMTB_F32;
  a.n = n;
  a.x = x;
  a.y = y;
  a.seed = 0x0123456789abcdefull;
  a.stream = (uint64_t)5 << 16 | 7;
  a.threshold = esmt_dropout_threshold(p);
  a.scale = (float)(1.0 / (1.0 - p));
  a.accumulate = accumulate;
  return a;
}

/* y = mask * x / (1 - p), element by element from the header, on 1 and 2
 * threads, over lengths that end inside a group of four; the kept fraction
 * within 4 sigma of 1 - p. */
static void test_matches_header(void **state) {
  (void)state;
  const size_t n = 4099;
  const double p = 0.3;
  float *x = randf(n, 1.0), *y = malloc(n * sizeof *y), *y1 = malloc(n * sizeof *y1);
  assert_non_null(y);
  assert_non_null(y1);
  for (size_t i = 0; i < n; i++) y[i] = y1[i] = NAN; /* not read without accumulate */
  esmtb_dropout_args a = args(n, x, y, p, 0);
  assert_int_equal(ops->dropout(dev, &a, NULL), 0);
  a.y = y1;
  assert_int_equal(ops->dropout(dev1, &a, NULL), 0);
  assert_memory_equal(y, y1, n * sizeof *y);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const int keep = esmt_dropout_keep(a.seed, a.stream, i, a.threshold);
    const float want = keep ? a.scale * x[i] : 0.0f;
    if (y[i] != want) fail_msg("element %zu: %g, expected %g (keep %d)", i, y[i], want, keep);
    kept += (size_t)keep;
  }
  const double sigma = sqrt(p * (1.0 - p) / (double)n);
  assert_true(fabs((double)kept / (double)n - (1.0 - p)) < 4.0 * sigma);
  /* another stream, another mask */
  a.stream++;
  assert_int_equal(ops->dropout(dev, &a, NULL), 0);
  assert_memory_not_equal(y, y1, n * sizeof *y);
  free(x);
  free(y);
  free(y1);
}

/* accumulate adds the masked values to y; y may be x (in place). */
static void test_accumulate_in_place(void **state) {
  (void)state;
  const size_t n = 1029;
  float *x = randf(n, 1.0), *y = randf(n, 1.0), *want = malloc(n * sizeof *want);
  assert_non_null(want);
  esmtb_dropout_args a = args(n, x, y, 0.5, 1);
  for (size_t i = 0; i < n; i++)
    want[i] = y[i] + (esmt_dropout_keep(a.seed, a.stream, i, a.threshold) ? 2.0f * x[i] : 0.0f);
  assert_int_equal(ops->dropout(dev, &a, NULL), 0);
  assert_memory_equal(y, want, n * sizeof *y);
  a = args(n, x, x, 0.5, 0);
  for (size_t i = 0; i < n; i++)
    want[i] = esmt_dropout_keep(a.seed, a.stream, i, a.threshold) ? 2.0f * x[i] : 0.0f;
  assert_int_equal(ops->dropout(dev, &a, NULL), 0);
  assert_memory_equal(x, want, n * sizeof *x);
  free(x);
  free(y);
  free(want);
}

/* bf16 activations: the fp32 result of the widened input, rounded. */
static void test_bf16(void **state) {
  (void)state;
  const size_t n = 515;
  float *xf = randf(n, 1.0);
  uint16_t *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
  assert_non_null(x);
  assert_non_null(y);
  for (size_t i = 0; i < n; i++) x[i] = ref_bf16(xf[i]);
  esmtb_dropout_args a = args(n, x, y, 0.1, 0);
  a.dtype = ESMTB_BF16;
  assert_int_equal(ops->dropout(dev, &a, NULL), 0);
  for (size_t i = 0; i < n; i++) {
    uint32_t bits = (uint32_t)x[i] << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    const float want = esmt_dropout_keep(a.seed, a.stream, i, a.threshold) ? a.scale * v : 0.0f;
    assert_int_equal(y[i], ref_bf16(want));
  }
  a.x = NULL;
  assert_int_equal(ops->dropout(dev, &a, NULL), ESMTB_ERR_INVALID_ARGUMENT);
  free(xf);
  free(x);
  free(y);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_known_answers),
      cmocka_unit_test(test_matches_header),
      cmocka_unit_test(test_accumulate_in_place),
      cmocka_unit_test(test_bf16),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
