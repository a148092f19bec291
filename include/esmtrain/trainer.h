/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: the trainer (batch sources,
 * options, the training loop, checkpoints, metrics, data parallelism).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_API_TRAINER_H
#define ESMTRAIN_API_TRAINER_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Trainer                                                                    */
/* ------------------------------------------------------------------------ */

/* Where micro-batches come from: esmtrain's shard loader, or anything an
 * application provides. Every callback returns an esmt_status. */
typedef struct esmt_batch_source {
  uint32_t struct_size;
  void *user;
  /* Fill *batch with the next micro-batch (tokens/labels stay valid until
   * the next call). ESMT_ERR_STATE means the source is exhausted. */
  esmt_status (*next)(void *user, esmt_batch *batch);
  /* Rewind to the beginning (evaluation sources: same batches each time). */
  esmt_status (*reset)(void *user);
  /* Position as a JSON value written into buf (for checkpoints), and back. */
  esmt_status (*save_cursor)(void *user, char *buf, size_t cap);
  esmt_status (*restore_cursor)(void *user, const char *json);
  /* Appended (a caller whose struct_size ends before it has none): the
   * epoch (0-based) of the batch `next` returned last. With it an
   * evaluation over "the whole source" (eval_batches = 0) is one pass even
   * over an endless source (a loader with epochs = 0): it ends at the
   * first batch of another epoch, which it does not use. Without it the
   * source must end (ESMT_ERR_STATE). May be NULL; the loader's source
   * has it. */
  esmt_status (*epoch)(void *user, uint64_t *epoch);
} esmt_batch_source;

#define ESMT_BATCH_SOURCE_INIT ESMT_SIZED_INIT_(esmt_batch_source)

typedef struct esmt_train_metrics {
  uint32_t struct_size;
  int64_t step;               /* updates done (applied or skipped) */
  double loss;                /* masked-LM loss of the last update */
  double lr, grad_norm;
  uint64_t tokens;            /* real (non-pad) tokens trained on so far */
  double tokens_per_s;        /* over the last update */
  double mfu;                 /* against options.gemm_ceiling_gflops; 0 if unknown */
  double step_ms, forward_ms, backward_ms, optimizer_ms, data_ms, overhead_ms;
  double elapsed_s, eta_s;
  int64_t skipped;            /* updates skipped for non-finite loss/gradients */
  double loss_scale;          /* dynamic loss scale in use (1 when off) */
  int64_t overflows;          /* of `skipped`, those that were loss-scale overflows */
  /* Appended: share of the last update's micro-batch positions (this rank)
   * that were padding, 1 - real / (rows x row length). */
  double padding_fraction;
  /* Appended: the device the trainer computes on, on GPU backends (all -1
   * on the CPU backend and where unknown). Memory as the backend's
   * allocator sees it (mem_info: in use and in all; under
   * backend.device_memory_limit, the budget), in MiB. Busy share (0-100,
   * over the driver's last sample period) and temperature from NVML, found
   * by the device's PCI bus id, sampled at most once a second. */
  double device_memory_used_mib, device_memory_total_mib;
  double device_util_percent, device_temperature_c;
} esmt_train_metrics;

#ifdef __cplusplus /* see ESMT_SIZED_INIT_ */
#define ESMT_TRAIN_METRICS_INIT                                                          \
  ([] { esmt_train_metrics esmt_v_ = ESMT_SIZED_INIT_(esmt_train_metrics);              \
        esmt_v_.device_memory_used_mib = esmt_v_.device_memory_total_mib = -1;            \
        esmt_v_.device_util_percent = esmt_v_.device_temperature_c = -1;                  \
        return esmt_v_; }())
#else
#define ESMT_TRAIN_METRICS_INIT                                                          \
  { .struct_size = sizeof(esmt_train_metrics), .device_memory_used_mib = -1,            \
    .device_memory_total_mib = -1, .device_util_percent = -1, .device_temperature_c = -1 }
#endif

typedef struct esmt_eval_metrics {
  uint32_t struct_size;
  int64_t step;
  double loss;                /* mean CE over the selected positions */
  double perplexity;          /* exp(loss) */
  double accuracy;            /* argmax == label at selected positions */
  double unigram_perplexity;  /* an amino-acid frequency model on the same positions */
  uint64_t selected;
  /* Appended: with a task head (esmt_model_config.head), its metrics on
   * the evaluation (valid until the next evaluation; `loss` is the head's
   * loss, `accuracy` the task's, `selected` the scored rows or residues);
   * NULL otherwise. A caller whose struct ends before it has none. */
  const struct esmt_task_metrics *task;
} esmt_eval_metrics;

#define ESMT_EVAL_METRICS_INIT ESMT_SIZED_INIT_(esmt_eval_metrics)

/* Called after each logged update (eval == NULL) and each evaluation. */
typedef void (*esmt_metrics_fn)(void *user, const esmt_train_metrics *train,
                                const esmt_eval_metrics *eval);

/* Dynamic loss scaling (fp16): the loss is multiplied by `scale` before
 * backward and the gradients divided by it in the optimizer. A non-finite
 * gradient is an overflow: the update is skipped (counted in
 * metrics.overflows) and, after `hysteresis` overflows without a clean
 * update between them, the scale is multiplied by `backoff`; after
 * `growth_interval` clean updates it doubles. An overflow that would take
 * the scale below `min` saves a checkpoint and stops the run with
 * ESMT_ERR_NUMERIC and diagnostics. A non-finite LOSS is not an overflow
 * and follows nonfinite_abort. Off: gradients are used as computed. */
typedef struct esmt_loss_scale_config {
  uint32_t struct_size;
  int enabled;
  double initial;             /* 65536 */
  int64_t growth_interval;    /* 2000 */
  double backoff;             /* 0.5 */
  int hysteresis;             /* 2 */
  double min;                 /* 1 */
} esmt_loss_scale_config;

#define ESMT_LOSS_SCALE_CONFIG_INIT { sizeof(esmt_loss_scale_config), 0, 65536.0, 2000, 0.5, 2, 1.0 }

/* esmt_trainer_options.gemm_ceiling_gflops: let the trainer measure it. */
#define ESMT_GEMM_CEILING_AUTO (-1.0)

typedef struct esmt_trainer_options {
  uint32_t struct_size;
  const char *run_dir;        /* checkpoints/ and state live here; NULL = no saving */
  int64_t max_steps;          /* updates; 0 = until the source ends or a stop */
  uint64_t tokens_per_update; /* accumulate micro-batches to this many tokens; 0 = one */
  /* The versioned structs below are pointed to, never held by value (one
   * that grows would move every later field); the trainer copies them at
   * create. */
  const esmt_optimizer_config *optimizer; /* NULL: ESMT_OPTIMIZER_CONFIG_INIT */
  const esmt_schedule *schedule;          /* NULL: ESMT_SCHEDULE_INIT; its peak_lr is THE
                                           * learning rate; total_steps 0 = max_steps */
  double grad_clip;           /* global-norm clip; 0 = off */
  int nonfinite_abort;        /* 0: skip the update and count it; 1: stop with an error */
  int log_every;              /* metrics callback every N updates (0 = never) */
  int eval_every;             /* evaluate every N updates (0 = never) */
  int eval_batches;           /* batches per evaluation (0 = the whole source) */
  int save_every;             /* checkpoint every N updates (0 = none periodic: at the end,
                               * and at each evaluation that improves the best loss) */
  int keep_last;              /* checkpoints kept (0 = all); the best is always kept */
  double max_time_s;          /* stop (and save) after this long; 0 = no limit */
  /* For MFU in the metrics; 0 = not reported. ESMT_GEMM_CEILING_AUTO:
   * measured by the trainer after its first update, in the model's compute
   * precision at its FFN-up GEMM's shape (micro-batch tokens x ffn x
   * hidden), so MFU is quoted against what that GEMM reaches here. */
  double gemm_ceiling_gflops;
  const char *config_text;    /* recorded in checkpoints (e.g. the resolved YAML) */
  esmt_metrics_fn metrics;
  void *metrics_user;
  /* Stages "train" (after each update), "eval" (each batch) and "save"
   * (before and after each checkpoint); a non-zero return from train or
   * eval stops cleanly. NULL: the context's progress callback. */
  esmt_progress_fn progress;
  void *progress_user;
  const esmt_loss_scale_config *loss_scale; /* NULL: off; the config turns it on for fp16 */
  int metrics_files_off; /* appended: 1 = the trainer writes no metrics.jsonl/event files into run_dir */
  /* Appended (fine-tuning; a caller whose struct ends before them gets
   * NULL and 0). best_metric: the evaluation figure that picks the best
   * checkpoint, one of esmt_task_metric_value's names ("macro_f1", "rmse",
   * ..., "loss"; NULL: the loss), compared in its direction. patience > 0:
   * the run ends (and saves) after that many evaluations in a row found
   * no better value of it; 0: never early. */
  const char *best_metric;
  int patience;
} esmt_trainer_options;

#define ESMT_TRAINER_OPTIONS_INIT                                                     \
  { sizeof(esmt_trainer_options), NULL, 0, 0, NULL, NULL,                             \
    0.0, 0, 10, 0, 0, 0, 3, 0.0, 0.0, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0 }

/* Run directories. A run directory holds checkpoints/ (`latest` and
 * step-NNNNNNNN directories), the metrics files and run.lock. Two rules
 * keep a run whole, for the trainer and for every program alike:
 *  - a run is never written over: a directory that already holds
 *    checkpoints is continued only from one of its own checkpoints; a
 *    path through a file, a dataset, a checkpoint, a run's checkpoints/
 *    and a checkpoints/ that is a symbolic link are refused whatever the
 *    resume;
 *  - one process writes a run: it holds run.lock (an flock(2) that dies
 *    with its process, so a lock file left by an ended process is simply
 *    taken again); a refused writer is told the holder's pid, host, start
 *    time and command. */

/* ESMT_OK when a run may be written into run_dir: a new run (resume NULL)
 * or continuing `resume` ("latest" for run_dir's own, or a checkpoint
 * path); else ESMT_ERR_STATE saying what run_dir is and what to do.
 * Reads only: nothing is created. */
ESMT_API esmt_status esmt_run_dir_check(const char *run_dir, const char *resume);

typedef struct esmt_run_lock esmt_run_lock;

/* Take DIR/run.lock (DIR is created when missing) and record this process
 * in it; ESMT_ERR_STATE naming the holder when another process has it. */
ESMT_API esmt_status esmt_run_lock_take(const char *dir, esmt_run_lock **out);

/* Release the lock. A directory the lock created that holds nothing else
 * goes with it (a failed program leaves no empty run behind). NULL is a
 * no-op. */
ESMT_API void esmt_run_lock_release(esmt_run_lock *lock);

/* The pid of a run.lock record's "pid N" line: 1 with *pid set, 0 when
 * the record has none, -1 when it is not a process id. */
ESMT_API int esmt_run_lock_record_pid(const char *record, long *pid);

/* 1 when `inner` is or lies inside `outer`, symbolic links resolved (paths
 * that do not exist yet compared as written); 0 otherwise. */
ESMT_API int esmt_path_inside(const char *inner, const char *outer);

/* 1 when `path` is or lies inside what esmtrain keeps (a dataset, a
 * checkpoint, a run or its checkpoints/, an exported or Hugging Face model
 * directory): no output may be written there; `what` (may be NULL)
 * receives "DIR (a run)". */
ESMT_API int esmt_path_in_data(const char *path, char *what, size_t cap);

typedef struct esmt_trainer esmt_trainer;

/* A trainer drives `model` (which must outlive it) from `train` batches.
 * With a run_dir the trainer keeps the run directory's rules above: it
 * refuses at once a run_dir that no run may use; into a run_dir that
 * already holds a run it may only esmt_trainer_resume one of that run's
 * checkpoints (any step, save or run before that is refused with
 * ESMT_ERR_STATE and nothing on disk is touched); it takes run.lock (on
 * data-parallel rank 0) at esmt_trainer_resume, esmt_trainer_take_run or
 * its first step or save, whichever comes first, and releases it on
 * destroy. A run directory it created and wrote nothing into is removed
 * on destroy. */
ESMT_API esmt_status esmt_trainer_create(esmt_model *model, const esmt_trainer_options *opts,
                                         const esmt_batch_source *train, esmt_trainer **out);
ESMT_API void esmt_trainer_destroy(esmt_trainer *trainer);

/* Batches for evaluation (reset before every evaluation). */
ESMT_API esmt_status esmt_trainer_set_eval_source(esmt_trainer *trainer,
                                                  const esmt_batch_source *eval);

/* One update (accumulating micro-batches to tokens_per_update). */
ESMT_API esmt_status esmt_trainer_step(esmt_trainer *trainer, esmt_train_metrics *metrics);

/* Evaluate on the eval source (fixed masking: the source's business). */
ESMT_API esmt_status esmt_trainer_evaluate(esmt_trainer *trainer, esmt_eval_metrics *metrics);

/* Train until max_steps, max_time_s, the end of the data, a progress
 * callback's cancel or esmt_trainer_request_stop(); evaluates and saves as
 * configured, and saves a final checkpoint. Returns ESMT_ERR_CANCELLED
 * (after saving) when stopped early on request. */
ESMT_API esmt_status esmt_trainer_run(esmt_trainer *trainer);

/* Ask a running esmt_trainer_run to stop after the current update and
 * save. Async-signal-safe: call it from a SIGINT/SIGTERM handler. */
ESMT_API void esmt_trainer_request_stop(esmt_trainer *trainer);

/* Save a checkpoint now; *path (may be NULL) receives its directory. */
ESMT_API esmt_status esmt_trainer_save(esmt_trainer *trainer, char *path, size_t cap);

/* Restore weights, moments, counters, RNG and data position from a
 * checkpoint ("RUN_DIR", "RUN_DIR/checkpoints/latest" or a checkpoint
 * directory): training continues exactly where it stopped. */
ESMT_API esmt_status esmt_trainer_resume(esmt_trainer *trainer, const char *checkpoint);

/* Load only the weights of a checkpoint (fresh optimizer, step 0); "hf:DIR"
 * loads a Hugging Face ESM-2 directory instead. A model with a task head
 * or LoRA adapters takes the encoder of such a (pre-trained, masked-LM)
 * checkpoint of its shape; its head and adapters keep their fresh
 * initialisation (a checkpoint of the task model itself loads whole). */
ESMT_API esmt_status esmt_trainer_init_from(esmt_trainer *trainer, const char *checkpoint);

/* Take the run directory now (the checks above and run.lock) rather than
 * at the first step: a program learns at once that it may write the run.
 * ESMT_OK without a run_dir. */
ESMT_API esmt_status esmt_trainer_take_run(esmt_trainer *trainer);

/* Updates done so far. */
ESMT_API int64_t esmt_trainer_step_count(const esmt_trainer *trainer);

/* Data parallelism of this trainer: returns the number of ranks (1 when it
 * trains alone) and, when buf is not NULL, one line such as "2 ranks,
 * gradients summed over MPI (Open MPI v4.1.4)" or "4 ranks, gradients
 * reduce-scattered (ZeRO-1) over TCP ring" ("" alone). */
ESMT_API int esmt_trainer_data_parallel(const esmt_trainer *trainer, char *buf, size_t cap);

/* The data-parallel layout a launcher gave this process, read as the
 * trainer reads it (esmtrain's `launch`, torchrun, Slurm, Open MPI, PMI:
 * docs/distributed.md): this process's rank, the world size, and its rank
 * and the number of ranks on this machine (which share its cores). 0, 1,
 * 0, 1 when no launcher started it. Any pointer may be NULL.
 * ESMT_ERR_CONFIG naming the variable when one is malformed. */
ESMT_API esmt_status esmt_launch_layout(int *rank, int *world_size, int *local_rank,
                                        int *local_world_size);

/* ------------------------------------------------------------------------ */
/* A run's metrics read back (metrics.jsonl, docs/formats.md)               */
/* ------------------------------------------------------------------------ */

/* Lines the trainer wrote: "train" (every log step) and "eval". A value a
 * line lacks (an older file, the CPU backend's device fields, a null
 * loss) is NAN. */
typedef struct esmt_metrics_train {
  int64_t step;
  double loss, lr, grad_norm, tokens, tokens_per_s, mfu, step_ms, elapsed_s, eta_s, padding,
      loss_scale, overflows, skipped, rss_mib;
  double max_steps;                                         /* 0: until the data ends */
  double device_util, device_mem_mib, device_mem_total_mib; /* GPU backends */
} esmt_metrics_train;

typedef struct esmt_metrics_eval {
  int64_t step;
  double loss, perplexity, accuracy, unigram_perplexity;
  double tokens; /* tokens trained on at that step (from the train lines), else NAN */
} esmt_metrics_eval;

/* The records read so far, as arrays (valid until the next poll/close). */
typedef struct esmt_metrics_view {
  uint32_t struct_size;
  const esmt_metrics_train *train;
  size_t n_train;
  const esmt_metrics_eval *eval;
  size_t n_eval;
  size_t bad_lines; /* complete lines that were not a train or eval record */
} esmt_metrics_view;

#define ESMT_METRICS_VIEW_INIT { sizeof(esmt_metrics_view), NULL, 0, NULL, 0, 0 }

/* A metrics.jsonl followed as it grows (the reader holds no descriptor
 * between polls). */
typedef struct esmt_metrics_reader esmt_metrics_reader;

ESMT_API esmt_status esmt_metrics_reader_open(const char *path, esmt_metrics_reader **out);
ESMT_API void esmt_metrics_reader_close(esmt_metrics_reader *reader);
/* Read the complete lines appended since the last poll. A missing file
 * is no error (nothing read, *added 0) unless `must_exist`. A file
 * replaced (a resume rewrites it) or cut shorter is read again from its
 * start and *reset set to 1 (the records before are dropped). added and
 * reset may be NULL. */
ESMT_API esmt_status esmt_metrics_reader_poll(esmt_metrics_reader *reader, int must_exist,
                                              size_t *added, int *reset);
ESMT_API esmt_status esmt_metrics_reader_view(const esmt_metrics_reader *reader,
                                              esmt_metrics_view *view);

#endif /* ESMTRAIN_API_TRAINER_H */
