/* SPDX-License-Identifier: MIT */
/* Mixed-precision training on the cpu backend's own half-precision ops:
 * the same tiny model in bf16 (and fp16 where offered) against fp32 - the
 * loss within 2e-2 relative over a few AdamW steps, the gradients within
 * 5e-2. Skips (exit 77) while the cpu backend lacks ESMTB_CAP_BF16;
 * test_mixed_fake covers the core's side with emulated half ops. */
#include "test_util.h"

#include <stdio.h>

#include "context.h"
#include "mixed_compare.h"

static esmt_context *g_ctx;

static void compare(esmt_precision p) {
  esmt_model_config c32 = mixed_tiny_config(ESMT_PRECISION_FP32), ch = mixed_tiny_config(p);
  esmt_model *m32 = NULL, *mh = NULL;
  if (esmt_model_create(g_ctx, &c32, 7, &m32) != ESMT_OK) fail_msg("%s", esmt_last_error());
  if (esmt_model_create(g_ctx, &ch, 7, &mh) != ESMT_OK) fail_msg("%s", esmt_last_error());
  mixed_compare(m32, mh, 5, 2e-2, 5e-2);
  esmt_model_destroy(mh);
  esmt_model_destroy(m32);
}

static void test_bf16(void **state) { (void)state; compare(ESMT_PRECISION_BF16); }

static void test_fp16(void **state) {
  (void)state;
  if (!(g_ctx->backend->ops->caps & ESMTB_CAP_F16)) skip();
  compare(ESMT_PRECISION_FP16);
}

int main(void) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  if (esmt_context_create(&o, &g_ctx) != ESMT_OK) {
    fprintf(stderr, "test_mixed_precision: %s\n", esmt_last_error());
    return 1;
  }
  if (!(g_ctx->backend->ops->caps & ESMTB_CAP_BF16)) {
    printf("SKIP: the cpu backend has no bf16 ops yet (no ESMTB_CAP_BF16); "
           "test_mixed_fake checks the core's half-precision paths meanwhile\n");
    esmt_context_destroy(g_ctx);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_fp16),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  esmt_context_destroy(g_ctx);
  return rc;
}
