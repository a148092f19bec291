/* SPDX-License-Identifier: MIT */
/* Drives the library for tests/interop/test_head_export.py:
 *   head_export_tool make OUT head num_labels pooling lora_rank lora_targets
 *     a 2-layer hidden-64 model (seed 1; LoRA's B set nonzero) saved as
 *     OUT/ck (esmt_model_save), with OUT/tokens.i32 [3 x 10] (right-padded
 *     rows) and OUT/outputs.f32, the head's outputs on them
 *     (esmt_model_infer);
 *   head_export_tool infer CKPT OUT
 *     the same rows through a checkpoint (an import's): OUT/outputs.f32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

#define CHECK(x) do { esmt_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, esmt_last_error()); return 1; } } while (0)

enum { ROWS = 3, T = 10 };
static const int k_lengths[ROWS] = {10, 7, 4};

static int write_file(const char *dir, const char *name, const void *p, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  return 0;
}

/* The head's outputs on the fixed rows into OUT/outputs.f32 (and the rows). */
static int infer(esmt_model *m, const char *out) {
  int32_t tokens[ROWS * T];
  for (int r = 0; r < ROWS; r++)
    for (int t = 0; t < T; t++)
      tokens[r * T + t] = t == 0 ? 0 : t == k_lengths[r] - 1 ? 2 : t < k_lengths[r]
                                                              ? 4 + (r * 7 + t * 3) % 20 : 1;
  esmt_model_config c = {.struct_size = sizeof c};
  CHECK(esmt_model_get_config(m, &c));
  const size_t n = (c.head == ESMT_HEAD_RESIDUE_CLASS ? (size_t)ROWS * T : ROWS) * c.num_labels;
  float *y = calloc(n, sizeof *y);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = ROWS;
  b.seq_len = T;
  b.tokens = tokens;
  esmt_infer_request rq = ESMT_INFER_REQUEST_INIT;
  rq.outputs = ESMT_INFER_HEAD;
  rq.head = y;
  CHECK(esmt_model_infer(m, &b, &rq));
  int bad = write_file(out, "tokens.i32", tokens, sizeof tokens) ||
            write_file(out, "outputs.f32", y, n * sizeof *y);
  free(y);
  return bad;
}

int main(int argc, char **argv) {
  esmt_context_options o;
  esmt_context_options_init(&o);
  o.backend = "cpu";
  o.num_threads = 2;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  CHECK(esmt_context_create(&o, &ctx));
  esmt_model *m = NULL;
  if (argc == 4 && !strcmp(argv[1], "infer")) {
    CHECK(esmt_model_create_from_checkpoint(ctx, argv[2], &m));
  } else if (argc == 8 && !strcmp(argv[1], "make")) {
    esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
    c.num_layers = 2;
    c.hidden_size = 64;
    c.num_heads = 4;
    c.ffn_size = 128;
    c.max_positions = 64;
    c.precision = ESMT_PRECISION_FP32;
    c.head = (esmt_head_kind)atoi(argv[3]);
    c.num_labels = atoi(argv[4]);
    c.pooling = (esmt_pooling)atoi(argv[5]);
    c.lora_rank = atoi(argv[6]);
    c.lora_alpha = 2.0f * (float)c.lora_rank;
    c.lora_targets = (unsigned)atoi(argv[7]);
    CHECK(esmt_model_create(ctx, &c, 1, &m));
    int count = 0;
    CHECK(esmt_model_tensor_count(m, &count));
    for (int i = 0; i < count; i++) { /* B nonzero, so that the adapters matter */
      esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
      CHECK(esmt_model_tensor_info(m, i, &t));
      if (!strstr(t.name, "lora_B")) continue;
      float *v = malloc(t.numel * sizeof *v);
      for (uint64_t k = 0; k < t.numel; k++) v[k] = 0.05f * (float)((k * 37 + (uint64_t)i) % 11) - 0.25f;
      CHECK(esmt_model_write_tensor(m, t.name, ESMT_BUF_PARAMS, v, t.numel));
      free(v);
    }
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ck", argv[2]);
    CHECK(esmt_model_save(m, ck, 0));
  } else {
    fprintf(stderr, "usage: head_export_tool make OUT head num_labels pooling lora_rank "
            "lora_targets | infer CKPT OUT\n");
    return 2;
  }
  int rc = infer(m, argc == 4 ? argv[3] : argv[2]);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return rc;
}
