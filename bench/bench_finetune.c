/* SPDX-License-Identifier: MIT */
/* LoRA fine-tuning steps on the CPU through the public API, the esmtrain
 * side of scripts/bench_finetune_vs_torch.sh (its peer is
 * bench/reference/bench_finetune_torch.py on the same data):
 *   bench_finetune DATA_DIR THREADS LAYERS HIDDEN HEADS RANK DROPOUT WARMUP STEPS
 * DATA_DIR: shape.txt ("batches B T"), tokens.i32 [batches, B, T] (right-
 * padded rows), targets.f32 [batches, B] (class 0 or 1). A seq-class head
 * (2 labels, <cls> pooling) and LoRA on query and value (alpha 2 x rank),
 * fp32, AdamW lr 1e-4, clip 1; batch i of the run is data batch
 * i mod batches. Prints one machine-readable line:
 *   ESMT_FINETUNE_RESULT steps=S tokens=N seconds=F tokens_per_s=F
 *                        first_loss=F last_loss=F */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "esmtrain/esmtrain.h"

#define CHECK(x) do { esmt_status s_ = (x); if (s_) { fprintf(stderr, "%s: %s\n", #x, esmt_last_error()); return 1; } } while (0)

static void *slurp(const char *dir, const char *name, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  void *p = malloc(bytes ? bytes : 1);
  if (!f || !p || fread(p, 1, bytes, f) != bytes) {
    fprintf(stderr, "bench_finetune: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return p;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 10) {
    fprintf(stderr, "usage: bench_finetune DATA_DIR THREADS LAYERS HIDDEN HEADS RANK DROPOUT "
            "WARMUP STEPS\n");
    return 2;
  }
  const char *dir = argv[1];
  const int threads = atoi(argv[2]), warmup = atoi(argv[8]), steps = atoi(argv[9]);
  char path[4096];
  snprintf(path, sizeof path, "%s/shape.txt", dir);
  FILE *sf = fopen(path, "r");
  int batches, B, T;
  if (!sf || fscanf(sf, "%d %d %d", &batches, &B, &T) != 3) {
    fprintf(stderr, "bench_finetune: cannot read %s\n", path);
    return 1;
  }
  fclose(sf);
  int32_t *tokens = slurp(dir, "tokens.i32", (size_t)batches * B * T * sizeof(int32_t));
  float *targets = slurp(dir, "targets.f32", (size_t)batches * B * sizeof(float));

  esmt_context_options o;
  CHECK(esmt_context_options_init(&o));
  o.backend = "cpu";
  o.num_threads = threads;
  o.log_level = ESMT_LOG_WARN;
  esmt_context *ctx = NULL;
  CHECK(esmt_context_create(&o, &ctx));
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = atoi(argv[3]);
  c.hidden_size = atoi(argv[4]);
  c.num_heads = atoi(argv[5]);
  c.max_positions = T > 1024 ? T : 1024;
  c.precision = ESMT_PRECISION_FP32;
  c.head = ESMT_HEAD_SEQ_CLASS;
  c.num_labels = 2;
  c.lora_rank = atoi(argv[6]);
  c.lora_alpha = 2.0f * (float)c.lora_rank;
  c.lora_dropout = (float)atof(argv[7]);
  c.lora_targets = ESMT_LORA_QUERY | ESMT_LORA_VALUE;
  esmt_model *m = NULL;
  CHECK(esmt_model_create(ctx, &c, 1, &m));
  esmt_optimizer_config oc;
  CHECK(esmt_optimizer_config_init(ESMT_OPTIMIZER_ADAMW, &oc));

  double t0 = 0.0, first = 0.0, last = 0.0;
  uint64_t counted = 0;
  for (int s = 0; s < warmup + steps; s++) {
    if (s == warmup) t0 = now();
    const int k = s % batches;
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B;
    b.seq_len = T;
    b.tokens = tokens + (size_t)k * B * T;
    b.targets = targets + (size_t)k * B;
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    CHECK(esmt_model_zero_grad(m));
    CHECK(esmt_model_forward(m, &b, &r, NULL));
    CHECK(esmt_model_backward(m));
    CHECK(esmt_model_optimizer_step(m, &oc, 1e-4, 1.0, s + 1));
    if (s == 0) first = r.loss;
    last = r.loss;
    if (s >= warmup) counted += (uint64_t)B * (uint64_t)T;
  }
  const double secs = now() - t0;
  printf("ESMT_FINETUNE_RESULT steps=%d tokens=%llu seconds=%.4f tokens_per_s=%.1f "
         "first_loss=%.5f last_loss=%.5f\n", steps, (unsigned long long)counted, secs,
         (double)counted / secs, first, last);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  free(tokens);
  free(targets);
  return 0;
}
