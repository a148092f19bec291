/* Drives the real library for tests/interop/test_hf_roundtrip.py:
 *   interop_tool logits HF_DIR TOKENS.i32 B T OUT.f32
 *       import, forward, write logits [B*T*33] float32
 *   interop_tool train-export HF_DIR TOKENS.i32 LABELS.i32 B T STEPS OUT_DIR
 *       import, STEPS AdamW updates (lr 1e-3), export to OUT_DIR, and write
 *       the trained model's logits to OUT_DIR/esmt_logits.f32
 *   interop_tool roundtrip HF_DIR TOKENS.i32 B T WORK_DIR
 *       import, write logits to WORK_DIR/logits_import.f32, save the model
 *       (esmt_model_save, WORK_DIR/ck), make a model from that checkpoint,
 *       write its logits to WORK_DIR/logits_ckpt.f32 and export it to
 *       WORK_DIR/export: every path an imported model takes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static void *slurp(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  void *b = malloc(want);
  if (!f || !b || fread(b, 1, want, f) != want) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
  fclose(f);
  return b;
}

static void spill(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
  fclose(f);
}

#define CHECK(x) do { esmt_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, esmt_last_error()); return 1; } } while (0)

int main(int argc, char **argv) {
  if (argc < 7) { fprintf(stderr, "usage: see the source\n"); return 2; }
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = "cpu";
  esmt_context *ctx = NULL;
  CHECK(esmt_context_create(&o, &ctx));
  esmt_model *m = NULL;
  CHECK(esmt_model_import_hf(ctx, argv[2], &m));
  if (!strcmp(argv[1], "roundtrip")) {
    int B = atoi(argv[4]), T = atoi(argv[5]);
    size_t n = (size_t)B * T;
    int32_t *tok = slurp(argv[3], n * 4);
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B; b.seq_len = T; b.tokens = tok;
    float *logits = malloc(n * ESMT_VOCAB_SIZE * sizeof *logits);
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    char p[4096];
    CHECK(esmt_model_forward(m, &b, &r, logits));
    snprintf(p, sizeof p, "%s/logits_import.f32", argv[6]);
    spill(p, logits, n * ESMT_VOCAB_SIZE * 4);
    snprintf(p, sizeof p, "%s/ck", argv[6]);
    CHECK(esmt_model_save(m, p, 0));
    esmt_model *c = NULL;
    CHECK(esmt_model_create_from_checkpoint(ctx, p, &c));
    CHECK(esmt_model_forward(c, &b, &r, logits));
    snprintf(p, sizeof p, "%s/logits_ckpt.f32", argv[6]);
    spill(p, logits, n * ESMT_VOCAB_SIZE * 4);
    snprintf(p, sizeof p, "%s/export", argv[6]);
    CHECK(esmt_model_export_hf(c, p, 0));
    esmt_model_destroy(c);
    esmt_model_destroy(m);
    esmt_context_destroy(ctx);
    free(tok);
    free(logits);
    return 0;
  }
  int train = !strcmp(argv[1], "train-export");
  int B = atoi(argv[train ? 5 : 4]), T = atoi(argv[train ? 6 : 5]);
  size_t n = (size_t)B * T;
  int32_t *tok = slurp(argv[3], n * 4), *lab = train ? slurp(argv[4], n * 4) : NULL;
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B; b.seq_len = T; b.tokens = tok; b.labels = lab;
  float *logits = malloc(n * ESMT_VOCAB_SIZE * sizeof *logits);
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  const char *out = argv[train ? 8 : 6];
  if (train) {
    int steps = atoi(argv[7]);
    esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
    double ac_lr = 1e-3; /* the learning rate is the step's argument */
    for (int s = 1; s <= steps; s++) {
      CHECK(esmt_model_zero_grad(m));
      CHECK(esmt_model_forward(m, &b, &r, NULL));
      CHECK(esmt_model_backward(m));
      CHECK(esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, s));
      fprintf(stderr, "step %d loss %.4f\n", s, r.loss);
    }
    CHECK(esmt_model_export_hf(m, out, 0));
    b.labels = NULL;
    CHECK(esmt_model_forward(m, &b, &r, logits));
    char p[4096];
    snprintf(p, sizeof p, "%s/esmt_logits.f32", out);
    spill(p, logits, n * ESMT_VOCAB_SIZE * 4);
  } else {
    CHECK(esmt_model_forward(m, &b, &r, logits));
    spill(out, logits, n * ESMT_VOCAB_SIZE * 4);
  }
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  free(tok);
  free(lab);
  free(logits);
  return 0;
}
