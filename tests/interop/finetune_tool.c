/* SPDX-License-Identifier: MIT */
/* Drives the real library for tests/interop/test_finetune_reference.py:
 *   finetune_tool IN_DIR OUT_DIR
 * IN_DIR/case.txt: layers hidden heads ffn max_positions head num_labels
 * pooling frozen_layers B T steps lora_rank lora_alpha lora_targets
 * [lora_dropout] (esmt_model_config / esmt_batch values; the model seed is 1);
 * tokens.i32 and labels.i32 [B*T], targets.f32 (sequence heads),
 * class_weights.f32 (optional), tensors.txt ("name numel" lines) with
 * tensors.f32 (their values, concatenated) written into the model.
 * OUT_DIR: loss.txt, outputs.f32 (the head's outputs), names.txt (every
 * model tensor "name numel", layout order), grads.f32 (one step's
 * gradients, that order), before.f32 and after.f32 (the weights before and
 * after `steps` AdamW updates, lr 1e-2, each on a fresh forward/backward),
 * ck/ (esmt_model_save after them), resumed_a.f32 and resumed_b.f32 (the
 * weights after one more update of that model and of a new one loaded
 * from ck/ with its optimizer state); with LoRA, merged.f32 and
 * merged_outputs.f32 (IN's weights after esmt_model_lora_merge, and the
 * outputs of the merged model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/esmtrain.h"

static void *slurp(const char *dir, const char *name, size_t want, int optional) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f && optional) return NULL;
  void *b = malloc(want ? want : 1);
  if (!f || !b || fread(b, 1, want, f) != want) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
  fclose(f);
  return b;
}

static FILE *open_out(const char *dir, const char *name, const char *mode) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(1); }
  return f;
}

#define CHECK(x) do { esmt_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, esmt_last_error()); return 1; } } while (0)

/* Every tensor of `which`, layout order, into OUT/name. */
static int dump(esmt_model *m, esmt_buffer which, const char *out, const char *name) {
  int count = 0;
  CHECK(esmt_model_tensor_count(m, &count));
  FILE *f = open_out(out, name, "wb");
  for (int i = 0; i < count; i++) {
    esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
    CHECK(esmt_model_tensor_info(m, i, &t));
    float *v = malloc(t.numel * sizeof *v);
    CHECK(esmt_model_read_tensor(m, t.name, which, v, t.numel));
    fwrite(v, sizeof *v, t.numel, f);
    free(v);
  }
  fclose(f);
  return 0;
}

/* The reference's weights (IN/tensors.txt, tensors.f32), by name. */
static int load_tensors(esmt_model *m, const char *in) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tensors.txt", in);
  FILE *tf = fopen(path, "r");
  if (!tf) { fprintf(stderr, "cannot read %s\n", path); return 1; }
  snprintf(path, sizeof path, "%s/tensors.f32", in);
  FILE *vf = fopen(path, "rb");
  if (!vf) { fprintf(stderr, "cannot read %s\n", path); return 1; }
  char name[256];
  unsigned long long numel;
  while (fscanf(tf, "%255s %llu", name, &numel) == 2) {
    float *v = malloc(numel * sizeof *v);
    if (fread(v, sizeof *v, numel, vf) != numel) { fprintf(stderr, "short tensors.f32\n"); return 1; }
    CHECK(esmt_model_write_tensor(m, name, ESMT_BUF_PARAMS, v, numel));
    free(v);
  }
  fclose(tf);
  fclose(vf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: finetune_tool IN_DIR OUT_DIR\n"); return 2; }
  const char *in = argv[1], *out = argv[2];
  char path[4096];
  snprintf(path, sizeof path, "%s/case.txt", in);
  FILE *cf = fopen(path, "r");
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  int head, pooling, B, T, steps;
  if (!cf || fscanf(cf, "%d %d %d %d %d %d %d %d %d %d %d %d %d %f %u", &cfg.num_layers,
                    &cfg.hidden_size, &cfg.num_heads, &cfg.ffn_size, &cfg.max_positions, &head,
                    &cfg.num_labels, &pooling, &cfg.frozen_layers, &B, &T, &steps,
                    &cfg.lora_rank, &cfg.lora_alpha, &cfg.lora_targets) != 15 ||
      fscanf(cf, "%f", &cfg.lora_dropout) > 1) {
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  fclose(cf);
  cfg.head = (esmt_head_kind)head;
  cfg.pooling = (esmt_pooling)pooling;
  cfg.precision = ESMT_PRECISION_FP32;
  const int C = cfg.num_labels, per_row = head == ESMT_HEAD_SEQ_CLASS ? 1 : C;
  const size_t N = (size_t)B * T;

  esmt_context_options o;
  CHECK(esmt_context_options_init(&o));
  /* cpu.so, or the backend $ESMT_FINETUNE_BACKEND names (the emulated GPU
   * suite runs the same cases on ampere_bf16 in fp32) */
  const char *backend = getenv("ESMT_FINETUNE_BACKEND");
  o.backend = backend && *backend ? backend : "cpu";
  o.num_threads = 2;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  CHECK(esmt_context_create(&o, &ctx));
  esmt_model *m = NULL;
  CHECK(esmt_model_create(ctx, &cfg, 1, &m));

  if (load_tensors(m, in)) return 1;

  int32_t *tokens = slurp(in, "tokens.i32", N * sizeof(int32_t), 0);
  int32_t *labels = slurp(in, "labels.i32", N * sizeof(int32_t), 0);
  float *targets = slurp(in, "targets.f32", (size_t)B * per_row * sizeof(float), 1);
  float *weights = slurp(in, "class_weights.f32", (size_t)C * sizeof(float), 1);
  esmt_batch b = ESMT_BATCH_INIT;
  b.batch = B;
  b.seq_len = T;
  b.tokens = tokens;
  b.labels = head == ESMT_HEAD_RESIDUE_CLASS ? labels : NULL;
  b.targets = targets;
  b.class_weights = weights;

  const size_t n_out = (head == ESMT_HEAD_RESIDUE_CLASS ? N : (size_t)B) * C;
  float *outputs = malloc(n_out * sizeof *outputs);
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  CHECK(esmt_model_zero_grad(m));
  CHECK(esmt_model_forward(m, &b, &r, outputs));
  CHECK(esmt_model_backward(m));
  FILE *lf = open_out(out, "loss.txt", "w");
  fprintf(lf, "%.17g\n", r.loss);
  fclose(lf);
  FILE *of = open_out(out, "outputs.f32", "wb");
  fwrite(outputs, sizeof *outputs, n_out, of);
  fclose(of);
  int count = 0;
  CHECK(esmt_model_tensor_count(m, &count));
  FILE *nf = open_out(out, "names.txt", "w");
  for (int i = 0; i < count; i++) {
    esmt_tensor_info t = ESMT_TENSOR_INFO_INIT;
    CHECK(esmt_model_tensor_info(m, i, &t));
    fprintf(nf, "%s %llu\n", t.name, (unsigned long long)t.numel);
  }
  fclose(nf);
  if (dump(m, ESMT_BUF_GRADS, out, "grads.f32") || dump(m, ESMT_BUF_PARAMS, out, "before.f32"))
    return 1;

  esmt_optimizer_config oc;
  CHECK(esmt_optimizer_config_init(ESMT_OPTIMIZER_ADAMW, &oc));
  for (int s = 1; s <= steps; s++) {
    if (s > 1) { /* step 1 uses the gradients above */
      CHECK(esmt_model_zero_grad(m));
      CHECK(esmt_model_forward(m, &b, &r, NULL));
      CHECK(esmt_model_backward(m));
    }
    CHECK(esmt_model_optimizer_step(m, &oc, 1e-2, 1.0, s));
  }
  if (dump(m, ESMT_BUF_PARAMS, out, "after.f32")) return 1;

  /* save, load into a new model, one more update on both: equal weights
   * say the moments (held for what trains only) made the round trip */
  char ck[4096];
  snprintf(ck, sizeof ck, "%s/ck", out);
  CHECK(esmt_model_save(m, ck, steps));
  esmt_model *m2 = NULL;
  CHECK(esmt_model_create(ctx, &cfg, 2, &m2));
  int64_t loaded = 0;
  CHECK(esmt_model_load(m2, ck, 1, &loaded));
  esmt_model *both[2] = {m, m2};
  for (int k = 0; k < 2; k++) {
    CHECK(esmt_model_zero_grad(both[k]));
    CHECK(esmt_model_forward(both[k], &b, &r, NULL));
    CHECK(esmt_model_backward(both[k]));
    CHECK(esmt_model_optimizer_step(both[k], &oc, 1e-2, 1.0, loaded + 1));
  }
  if (dump(m, ESMT_BUF_PARAMS, out, "resumed_a.f32") ||
      dump(m2, ESMT_BUF_PARAMS, out, "resumed_b.f32"))
    return 1;
  esmt_model_destroy(m2);

  if (cfg.lora_rank > 0) { /* the reference's weights merged: merged.f32, merged_outputs.f32 */
    esmt_model *m3 = NULL;
    CHECK(esmt_model_create(ctx, &cfg, 3, &m3));
    if (load_tensors(m3, in)) return 1;
    CHECK(esmt_model_lora_merge(m3));
    CHECK(esmt_model_forward(m3, &b, &r, outputs));
    FILE *mf = open_out(out, "merged_outputs.f32", "wb");
    fwrite(outputs, sizeof *outputs, n_out, mf);
    fclose(mf);
    if (dump(m3, ESMT_BUF_PARAMS, out, "merged.f32")) return 1;
    esmt_model_destroy(m3);
  }
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  free(tokens);
  free(labels);
  free(targets);
  free(weights);
  free(outputs);
  return 0;
}
