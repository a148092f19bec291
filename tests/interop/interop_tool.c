/* SPDX-License-Identifier: MIT */
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
 *       WORK_DIR/export: every path an imported model takes
 *   interop_tool infer HF_DIR TOKENS.i32 B T LAYER OUT_DIR
 *       import, esmt_model_infer of LAYER (-1 = the last): OUT_DIR/
 *       per_token.f32, mean.f32, cls.f32, logits.f32; exit 3 when its
 *       logits differ from esmt_model_forward's in any bit
 *   interop_tool attention HF_DIR TOKENS.i32 B T NSEG OUT.f32 [SEGS.i32]
 *       import, esmt_model_infer's attention maps (ESMT_INFER_ATTENTION) of
 *       right-padded rows (NSEG 0; a row's length = its non-<pad> tokens)
 *       or of NSEG packed sequences (SEGS.i32: NSEG starts, then NSEG
 *       lengths) into OUT.f32 */
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
  if (!strcmp(argv[1], "attention")) {
    const int B = atoi(argv[4]), T = atoi(argv[5]), nseg = atoi(argv[6]);
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    CHECK(esmt_model_get_config(m, &mc));
    int32_t *tok = slurp(argv[3], (size_t)B * T * 4);
    int32_t *segs = nseg > 0 && argc > 8 ? slurp(argv[8], (size_t)nseg * 8) : NULL;
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B; b.seq_len = T; b.tokens = tok;
    size_t sq = 0; /* sum of n_p^2 */
    if (segs) {
      b.num_segments = nseg; b.seg_start = segs; b.seg_len = segs + nseg;
      for (int s = 0; s < nseg; s++) sq += (size_t)segs[nseg + s] * segs[nseg + s];
    } else {
      for (int r = 0; r < B; r++) {
        size_t n = 0;
        while (n < (size_t)T && tok[(size_t)r * T + n] != 1) n++;
        sq += n * n;
      }
    }
    const size_t count = (size_t)mc.num_layers * mc.num_heads * sq;
    esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
    r.outputs = ESMT_INFER_ATTENTION;
    r.attention = malloc(count * sizeof(float));
    CHECK(esmt_model_infer(m, &b, &r));
    spill(argv[7], r.attention, count * sizeof(float));
    esmt_model_destroy(m);
    esmt_context_destroy(ctx);
    free(tok); free(segs); free(r.attention);
    return 0;
  }
  if (!strcmp(argv[1], "infer")) {
    int B = atoi(argv[4]), T = atoi(argv[5]), d = 0;
    size_t n = (size_t)B * T;
    esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
    CHECK(esmt_model_get_config(m, &mc));
    d = mc.hidden_size;
    int32_t *tok = slurp(argv[3], n * 4);
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B; b.seq_len = T; b.tokens = tok;
    esmt_infer_request r = ESMT_INFER_REQUEST_INIT;
    r.layer = atoi(argv[6]);
    r.outputs = ESMT_INFER_PER_TOKEN | ESMT_INFER_MEAN | ESMT_INFER_CLS | ESMT_INFER_LOGITS;
    r.per_token = malloc(n * d * sizeof(float));
    r.mean = malloc((size_t)B * d * sizeof(float));
    r.cls = malloc((size_t)B * d * sizeof(float));
    r.logits = malloc(n * ESMT_VOCAB_SIZE * sizeof(float));
    float *fwd = malloc(n * ESMT_VOCAB_SIZE * sizeof(float));
    CHECK(esmt_model_infer(m, &b, &r));
    esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
    CHECK(esmt_model_forward(m, &b, &fr, fwd)); /* the training carving again */
    const int same = !memcmp(fwd, r.logits, n * ESMT_VOCAB_SIZE * sizeof(float));
    char p[4096];
    const struct { const char *name; const float *v; size_t count; } outs[] = {
        {"per_token", r.per_token, n * d}, {"mean", r.mean, (size_t)B * d},
        {"cls", r.cls, (size_t)B * d}, {"logits", r.logits, n * ESMT_VOCAB_SIZE}};
    for (int i = 0; i < 4; i++) {
      snprintf(p, sizeof p, "%s/%s.f32", argv[7], outs[i].name);
      spill(p, outs[i].v, outs[i].count * sizeof(float));
    }
    esmt_model_destroy(m);
    esmt_context_destroy(ctx);
    free(tok); free(r.per_token); free(r.mean); free(r.cls); free(r.logits); free(fwd);
    if (!same) fprintf(stderr, "infer: logits differ from esmt_model_forward's\n");
    return same ? 0 : 3;
  }
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
