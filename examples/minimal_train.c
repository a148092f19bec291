/* SPDX-License-Identifier: MIT */
/* The smallest training loop over the public API: context -> model ->
 * loader -> forward / backward / AdamW, printing the masked-LM loss.
 * Usage: minimal_train DATASET_DIR [STEPS]   (DATASET_DIR from
 * `esmtrain-example ingest`). esmt_trainer adds accumulation, clipping,
 * evaluation and checkpoints on top of exactly these calls. */
#include <esmtrain/esmtrain.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    esmt_status st_ = (call);                                                        \
    if (st_ != ESMT_OK) {                                                            \
      fprintf(stderr, "minimal_train: %s: %s\n", #call, esmt_last_error());          \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: minimal_train DATASET_DIR [STEPS]\n");
    return 2;
  }
  const int steps = argc > 2 ? atoi(argv[2]) : 20;
  esmt_context *ctx = NULL;
  CHECK(esmt_context_create(NULL, &ctx)); /* probes the machine, picks a backend */

  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT; /* esm2_t6_8M's shape, made smaller */
  cfg.num_layers = 2;
  cfg.hidden_size = 64;
  cfg.num_heads = 4;
  cfg.max_positions = 128;
  esmt_model *model = NULL;
  CHECK(esmt_model_create(ctx, &cfg, /*seed=*/1, &model));

  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT; /* masking as ESM-2: 15%, 80/10/10 */
  lo.dir = argv[1];
  lo.max_len = 128;
  lo.tokens_per_batch = 1024;
  esmt_loader *loader = NULL;
  CHECK(esmt_loader_create(&lo, &loader));

  esmt_schedule sched = ESMT_SCHEDULE_INIT; /* warmup, then ESM-2's linear decay */
  sched.peak_lr = 1e-3;
  sched.warmup_steps = steps / 10 + 1;
  sched.total_steps = steps;
  esmt_optimizer_config adamw = ESMT_OPTIMIZER_CONFIG_INIT; /* ESM-2's AdamW */
  for (int step = 1; step <= steps; step++) {
    esmt_batch batch = ESMT_BATCH_INIT;
    esmt_forward_result fwd = ESMT_FORWARD_RESULT_INIT;
    CHECK(esmt_loader_next(loader, &batch));
    CHECK(esmt_model_zero_grad(model));
    CHECK(esmt_model_forward(model, &batch, &fwd, NULL));
    CHECK(esmt_model_backward(model));
    double lr = 0;
    CHECK(esmt_schedule_lr(&sched, step, &lr));
    CHECK(esmt_model_optimizer_step(model, &adamw, lr, 1.0, step));
    printf("step %3d  loss %.4f  lr %.2e  (%llu masked positions)\n", step, fwd.loss, lr,
           (unsigned long long)fwd.selected);
    if (!isfinite(fwd.loss)) return 1;
  }
  esmt_loader_destroy(loader);
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  return 0;
}
