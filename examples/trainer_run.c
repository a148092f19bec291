/* SPDX-License-Identifier: MIT */
/* A training run through esmt_trainer over the public API: the trainer
 * adds evaluation, checkpoints and the run's metrics files to the loop of
 * minimal_train.c. With a run directory the library itself writes
 * RUN_DIR/metrics.jsonl and TensorBoard event files (watch them with
 * `esmtrain-example watch RUN_DIR`, draw them with `esmtrain-example plot
 * RUN_DIR -o curves.png`, or `tensorboard --logdir RUN_DIR`).
 * Usage: trainer_run DATASET_DIR RUN_DIR [STEPS]   (DATASET_DIR from
 * `esmtrain-example ingest` with a validation split). */
#include <esmtrain/esmtrain.h>
#include <stdio.h>
#include <stdlib.h>

/* Called on every logged update and evaluation (the files are written
 * whether or not a program asks for this). */
static void on_metrics(void *user, const esmt_train_metrics *t, const esmt_eval_metrics *e) {
  (void)user;
  if (t) printf("step %3lld  loss %.4f  %.0f tokens/s\n", (long long)t->step, t->loss,
                t->tokens_per_s);
  if (e) printf("eval at %lld: perplexity %.2f (amino-acid frequencies %.2f)\n",
                (long long)e->step, e->perplexity, e->unigram_perplexity);
}

static int fail(const char *what, esmt_status st) {
  fprintf(stderr, "trainer_run: %s: %s (%s)\n", what, esmt_last_error(), esmt_status_string(st));
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: trainer_run DATASET_DIR RUN_DIR [STEPS]\n");
    return 2;
  }
  const int steps = argc > 3 ? atoi(argv[3]) : 20;
  esmt_context *ctx = NULL;
  esmt_model *model = NULL;
  esmt_loader *train = NULL, *valid = NULL;
  esmt_trainer *trainer = NULL;
  int rc = 1;
  esmt_status st = esmt_context_create(NULL, &ctx);
  if (st) return fail("context", st);

  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  cfg.num_layers = 2;
  cfg.hidden_size = 64;
  cfg.num_heads = 4;
  cfg.max_positions = 128;
  if ((st = esmt_model_create(ctx, &cfg, /*seed=*/1, &model))) { rc = fail("model", st); goto out; }

  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
  lo.dir = argv[1];
  lo.max_len = 128;
  lo.tokens_per_batch = 1024;
  if ((st = esmt_loader_create(&lo, &train))) { rc = fail("training data", st); goto out; }
  lo.split = ESMT_SPLIT_VALID; /* evaluation: file order, the same masks every time */
  lo.shuffle = 0;
  lo.fixed_masking = 1;
  lo.epochs = 1;
  if ((st = esmt_loader_create(&lo, &valid))) { rc = fail("validation data", st); goto out; }

  esmt_schedule sched = ESMT_SCHEDULE_INIT;
  sched.peak_lr = 1e-3;
  sched.warmup_steps = steps / 10 + 1;
  esmt_trainer_options to = ESMT_TRAINER_OPTIONS_INIT;
  to.run_dir = argv[2]; /* checkpoints/, metrics.jsonl, events.out.tfevents.* */
  to.max_steps = steps;
  to.schedule = &sched;
  to.log_every = 1;
  to.eval_every = steps / 4 > 0 ? steps / 4 : 1;
  to.metrics = on_metrics;
  esmt_batch_source ts = ESMT_BATCH_SOURCE_INIT, vs = ESMT_BATCH_SOURCE_INIT;
  if ((st = esmt_loader_as_source(train, &ts)) || (st = esmt_loader_as_source(valid, &vs)) ||
      (st = esmt_trainer_create(model, &to, &ts, &trainer)) ||
      (st = esmt_trainer_set_eval_source(trainer, &vs))) {
    rc = fail("trainer", st);
    goto out;
  }
  if ((st = esmt_trainer_run(trainer))) { rc = fail("run", st); goto out; }
  printf("done: %s/metrics.jsonl and a TensorBoard event file\n", argv[2]);
  rc = 0;
out:
  esmt_trainer_destroy(trainer);
  esmt_loader_destroy(valid);
  esmt_loader_destroy(train);
  esmt_model_destroy(model);
  esmt_context_destroy(ctx);
  return rc;
}
