/* SPDX-License-Identifier: MIT */
/* The trainer object (trainer.c: steps and run loop; trainer_eval.c:
 * evaluation; trainer_state.c: checkpointed state). */
#ifndef ESMTRAIN_TRAINER_H
#define ESMTRAIN_TRAINER_H

#include <signal.h>

#include "device_stats.h"
#include "loss_scaler.h"
#include "trainer_update.h"

struct esmt_trainer {
  esmt_model *m;
  esmt_trainer_options o;
  char *run_dir, *config_text;      /* owned copies of the option strings */
  esmt_batch_source train, eval;
  int has_eval;
  esmt_update_params up;

  int64_t step, adam_step, skipped;
  esmt_loss_scaler scaler;          /* dynamic loss scale (fp16); off: scale 1 */
  int at_floor;                     /* the scaler overflowed at its floor: stop */
  double last_finite_norm;          /* diagnostics for that stop */
  uint64_t tokens;
  double elapsed_before;            /* seconds trained before a resume */
  double t_start;                   /* clock at create/resume */
  double best_eval_loss;            /* +inf until the first evaluation */
  uint64_t aa_counts[ESMT_VOCAB_SIZE]; /* residues seen (for the frequency baseline) */
  char *resume_changes;             /* JSON array of settings changed at resumes, or NULL */
  /* Set by esmt_trainer_request_stop (any thread, a signal handler); the
   * run, step or evaluation it stops consumes it, so it is not permanent. */
  volatile sig_atomic_t stop_requested;
  double run_deadline;              /* esmt_now_s() when max_time_s ends a run; 0: none */
  int64_t last_saved_step;          /* step of the last checkpoint written; -1: none */
  int in_run;                       /* inside esmt_trainer_run (it consumes stop requests) */
  int update_memory_checked;        /* tokens_per_update checked against host memory */
  int ceiling_pending;              /* ESMT_GEMM_CEILING_AUTO: measure after the next update */

  esmt_micro_batch *mbs;            /* owned copies of one update's micro-batches */
  int mb_count, mb_cap;
  size_t *mb_alloc;                 /* capacity (elements) of each copy */
  float *eval_logits;               /* host buffer for evaluation logits */
  size_t eval_logits_cap;

  esmt_dp *dp;                      /* data-parallel group (owned), NULL alone */
  struct esmt_metrics_sink *sink;   /* metrics.jsonl + event file (rank 0), opened at first use */
  int sink_opened;                  /* tried already (a failed open is not retried) */
  int64_t sink_start_step;          /* the step this trainer started at (0, or the resumed
                                     * one): the files keep what lies before it */
  esmt_device_stats devstats;       /* the device_* figures of the metrics */

  /* the run directory (trainer_run_dir.c) */
  int run_exists;                   /* it held a run at create: only resuming it may write */
  char run_what[4352];              /* ... what it held, for the refusal */
  int run_resumed;                  /* resumed from a checkpoint of the run itself */
  int run_taken;                    /* checked and locked (rank 0) for writing */
  esmt_run_lock *run_lock;          /* run.lock, held until destroy */

  /* owned when built by esmt_trainer_create_from_config */
  esmt_model *owned_model;
  esmt_loader *owned_train, *owned_valid;
  struct esmt_overfit_source *overfit;

  /* a task head (trainer_task_eval.c) */
  struct esmt_task_eval *task_eval; /* the last evaluation's outputs and labels */
  esmt_task_metrics task_metrics;   /* ... scored */
  char *best_metric;                /* owned copy of o.best_metric; NULL: the loss */
  double best_value;                /* of best_metric; NAN until an evaluation has one */
  int evals_since_best;             /* evaluations since the best one (patience) */
  int early_stopped;                /* patience ran out: the run ends after this update */
  struct esmt_finetune_owned *finetune_owned; /* esmt_finetune_create_from_config's table and loaders */
};

/* The trainer options a configuration sets (trainer_config.c), with the
 * structs they point to: optimizer, schedule, loss scale, log, evaluation
 * and checkpoint cadence, the run directory (none with no_run_dir); the
 * callbacks and config text from `base` (may be NULL). Shared by the
 * pre-training and fine-tuning builders. */
typedef struct esmt_trainer_config_options {
  esmt_trainer_options to;          /* points into the three below */
  esmt_optimizer_config oc;
  esmt_schedule sc;
  esmt_loss_scale_config lc;
} esmt_trainer_config_options;

struct esmt_config_reader;
/* The start of esmt_trainer_create_from_config and
 * esmt_finetune_create_from_config (trainer_config.c): the arguments
 * checked, *out cleared, the configuration validated, and rd reading it;
 * errors name fn. */
ESMT_HIDDEN esmt_status esmt_trainer_config_begin(const char *fn, const esmt_context *ctx,
                                                  const esmt_config *cfg, esmt_trainer **out,
                                                  struct esmt_config_reader *rd);
/* backend.precision as esmt_model_config.precision (trainer_config.c). */
ESMT_HIDDEN esmt_precision esmt_cfg_precision(struct esmt_config_reader *rd);
ESMT_HIDDEN esmt_status esmt_trainer_options_from_config(struct esmt_config_reader *rd,
                                                         const esmt_trainer_options *base,
                                                         const esmt_model *model,
                                                         esmt_optimizer_kind optimizer,
                                                         int64_t steps, int64_t eval_every,
                                                         int no_run_dir, const char *fn,
                                                         esmt_trainer_config_options *out);

/* The run directory's rules (trainer_run_dir.c): inspect at create
 * (refusing what no run may use); claim before the first write (refusing
 * an existing run not resumed, taking run.lock on rank 0); resume_run when
 * esmt_trainer_resume continues the checkpoint `spec` names (before reading it). */
ESMT_HIDDEN esmt_status esmt_trainer_inspect_run(esmt_trainer *t, const char *fn);
ESMT_HIDDEN esmt_status esmt_trainer_claim_run(esmt_trainer *t, const char *fn);
ESMT_HIDDEN esmt_status esmt_trainer_resume_run(esmt_trainer *t, const char *spec,
                                                const char *fn);

/* Run data parallel over `dp` (the trainer takes ownership; NULL: alone).
 * Checks the ranks agree on the weights first. */
ESMT_HIDDEN esmt_status esmt_trainer_set_dp(esmt_trainer *t, esmt_dp *dp);

/* Evaluation as the run does it: a stop request or the run's deadline ends
 * it with ESMT_ERR_CANCELLED and leaves the request set (the run consumes
 * it). esmt_trainer_evaluate is this plus consuming the request. */
ESMT_HIDDEN esmt_status esmt_trainer_evaluate_in_run(esmt_trainer *t, esmt_eval_metrics *out);

/* metrics.jsonl and the TensorBoard event file (metrics_sink.h), when the
 * trainer has a run_dir, on data-parallel rank 0, unless metrics_files_off;
 * opened at the current step at first use. Failures are warnings. */
ESMT_HIDDEN void esmt_trainer_write_metrics(esmt_trainer *t, const esmt_train_metrics *tm,
                                            const esmt_eval_metrics *em);

/* Trainer state <-> JSON text (malloc'ed) for checkpoints. */
ESMT_HIDDEN esmt_status esmt_trainer_state_to_json(esmt_trainer *t, char **json);
ESMT_HIDDEN esmt_status esmt_trainer_state_from_json(esmt_trainer *t, const char *json);

/* Before resuming from ckpt_dir: compare the run's recorded settings, world
 * size and dataset with this trainer's (resume_check.h); refuses changes
 * that break an exact continuation, warns about and records the others. */
ESMT_HIDDEN esmt_status esmt_trainer_resume_check(esmt_trainer *t, const char *ckpt_dir);

#endif
