/* SPDX-License-Identifier: MIT */
/* Trainer: accumulate micro-batches into updates, log, evaluate, save, and
 * run until done or asked to stop. */
#define _POSIX_C_SOURCE 200809L
#include "trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "optimizer.h"
#include "host_memory.h"
#include "metrics_sink.h"
#include "param_layer.h"
#include "trainer_finetune.h"


static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* Check a caller's source and copy it into *dst: only the struct_size
 * bytes it has (an older caller's source ends before `epoch`; the rest is
 * zero, i.e. absent). */
static esmt_status copy_source(esmt_batch_source *dst, const esmt_batch_source *s, const char *fn,
                               const char *what) {
  if (!s) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %s source is NULL", fn, what);
  esmt_status st = esmt_check_struct(fn, "esmt_batch_source", s->struct_size,
                                     offsetof(esmt_batch_source, epoch));
  if (st) return st;
  if (!s->next)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: %s source has no next()", fn, what);
  memset(dst, 0, sizeof *dst);
  memcpy(dst, s, s->struct_size < sizeof *dst ? s->struct_size : sizeof *dst);
  dst->struct_size = sizeof *dst;
  return ESMT_OK;
}

/* total_steps 0 is the run's max_steps; with neither there is nothing to
 * decay over, and the rate stays at its peak after warmup (said once). A
 * warmup as long as the run never reaches the peak: said too. */
static esmt_status resolve_schedule(esmt_model *m, esmt_schedule *s, int64_t max_steps) {
  if (s->total_steps <= 0) s->total_steps = max_steps;
  if (s->total_steps <= 0 && s->kind != ESMT_SCHEDULE_CONSTANT) {
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_WARN, "the learning-rate schedule decays over "
                    "schedule.total_steps, and neither it nor max_steps is set: the rate stays "
                    "at its peak %.3g after the warmup", s->peak_lr);
    s->kind = ESMT_SCHEDULE_CONSTANT;
  }
  if (s->total_steps > 0 && s->warmup_steps >= s->total_steps) {
    double last = 0;
    esmt_schedule_lr(s, s->total_steps, &last);
    esmt_logger_log(&m->ctx->logger, ESMT_LOG_WARN, "the warmup (%lld updates) is as long as "
                    "the run (%lld): the learning rate never reaches its peak %.3g and ends at "
                    "%.3g; lower schedule.warmup_steps", (long long)s->warmup_steps,
                    (long long)s->total_steps, s->peak_lr, last);
  }
  return ESMT_OK;
}

esmt_status esmt_trainer_create(esmt_model *m, const esmt_trainer_options *opts,
                                const esmt_batch_source *train, esmt_trainer **out) {
  const char *fn = "esmt_trainer_create";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(m && opts, fn, "model and options must not be NULL");
  /* an older caller's options end before metrics_files_off (read as 0) */
  esmt_status st = esmt_check_struct(fn, "esmt_trainer_options", opts->struct_size,
                                     offsetof(esmt_trainer_options, metrics_files_off));
  esmt_batch_source train_src;
  if (!st) st = copy_source(&train_src, train, fn, "training");
  if (st) return st;
  if (opts->max_steps < 0 || opts->log_every < 0 || opts->eval_every < 0 || opts->save_every < 0 ||
      opts->keep_last < 0 || opts->eval_batches < 0 || !(opts->grad_clip >= 0) ||
      !(opts->max_time_s >= 0))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: counts, grad_clip and max_time_s must be >= 0",
                     fn);
  if (!(opts->gemm_ceiling_gflops >= 0) && opts->gemm_ceiling_gflops != ESMT_GEMM_CEILING_AUTO)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "%s: gemm_ceiling_gflops must be >= 0 or ESMT_GEMM_CEILING_AUTO", fn);
  /* the structs the options point to, copied (NULL: their defaults) */
  esmt_optimizer_config oc = ESMT_OPTIMIZER_CONFIG_INIT;
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  esmt_loss_scale_config lc = ESMT_LOSS_SCALE_CONFIG_INIT;
  if (opts->optimizer &&
      !(st = esmt_check_struct(fn, "esmt_optimizer_config", opts->optimizer->struct_size,
                               ESMT_OPTIMIZER_CONFIG_MIN_SIZE))) {
    const uint32_t n = opts->optimizer->struct_size; /* an older caller's struct is shorter */
    memcpy(&oc, opts->optimizer, n < sizeof oc ? n : sizeof oc);
    oc.struct_size = sizeof oc;
  }
  if (!st && opts->schedule &&
      !(st = esmt_check_struct(fn, "esmt_schedule", opts->schedule->struct_size, sizeof sc)))
    memcpy(&sc, opts->schedule, sizeof sc);
  if (!st && opts->loss_scale &&
      !(st = esmt_check_struct(fn, "esmt_loss_scale_config", opts->loss_scale->struct_size,
                               sizeof lc)))
    memcpy(&lc, opts->loss_scale, sizeof lc);
  if (!st) st = esmt_optimizer_config_check(&oc, fn);
  if (st) return st;
  esmt_loss_scaler scaler;
  if ((st = esmt_loss_scaler_init(&scaler, &lc)))
    return esmt_fail_prefix(st, "%s: ", fn);
  esmt_trainer *t = calloc(1, sizeof *t);
  if (!t) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  t->scaler = scaler;
  t->m = m;
  memcpy(&t->o, opts, opts->struct_size < sizeof t->o ? opts->struct_size : sizeof t->o);
  t->o.struct_size = sizeof t->o;
  if (t->o.gemm_ceiling_gflops == ESMT_GEMM_CEILING_AUTO) {
    t->ceiling_pending = 1; /* once the first update shows the micro-batch shape */
    t->o.gemm_ceiling_gflops = 0;
  }
  t->run_dir = dup_or_null(opts->run_dir);
  t->config_text = dup_or_null(opts->config_text);
  t->o.run_dir = t->run_dir;
  t->o.config_text = t->config_text;
  t->o.optimizer = NULL; /* copied into t->up; the caller's may not outlive this call */
  t->o.schedule = NULL;
  t->o.loss_scale = NULL;
  t->train = train_src;
  t->up.optimizer = oc;
  t->up.schedule = sc;
  if ((st = resolve_schedule(m, &t->up.schedule, opts->max_steps))) {
    esmt_trainer_destroy(t);
    return st;
  }
  t->up.grad_clip = opts->grad_clip;
  t->up.nonfinite = opts->nonfinite_abort ? ESMT_NONFINITE_ABORT : ESMT_NONFINITE_SKIP;
  t->best_eval_loss = INFINITY;
  t->best_value = NAN;
  t->o.best_metric = NULL; /* t->best_metric, checked below */
  if ((st = esmt_trainer_set_best_metric(t, opts, fn))) {
    esmt_trainer_destroy(t);
    return st;
  }
  t->t_start = esmt_now_s();
  t->last_saved_step = -1;
  if ((opts->run_dir && !t->run_dir) || (opts->config_text && !t->config_text)) {
    esmt_trainer_destroy(t);
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  if ((st = esmt_trainer_inspect_run(t, fn))) {
    esmt_trainer_destroy(t);
    return st;
  }
  *out = t;
  return ESMT_OK;
}

void esmt_trainer_destroy(esmt_trainer *t) {
  if (!t) return;
  esmt_status st = esmt_metrics_sink_close(t->sink);
  if (st)
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "metrics files: %s", esmt_last_error());
  esmt_dp_destroy(t->dp);
  esmt_loader_destroy(t->owned_train);
  esmt_loader_destroy(t->owned_valid);
  esmt_model_destroy(t->owned_model);
  free(t->overfit);
  for (int i = 0; i < t->mb_cap; i++) {
    free(t->mbs[i].tokens);
    free(t->mbs[i].labels);
    free(t->mbs[i].seg_start);
    free(t->mbs[i].seg_len);
    free(t->mbs[i].targets);
  }
  esmt_task_eval_free(t);
  esmt_finetune_owned_free(t->finetune_owned);
  free(t->best_metric);
  free(t->mbs);
  free(t->mb_alloc);
  free(t->eval_logits);
  esmt_run_lock_release(t->run_lock); /* after the metrics files closed */
  free(t->run_dir);
  free(t->config_text);
  free(t->resume_changes);
  free(t);
}

esmt_status esmt_trainer_set_eval_source(esmt_trainer *t, const esmt_batch_source *eval) {
  ESMT_CHECK_ARG(t, "esmt_trainer_set_eval_source", "trainer is NULL");
  esmt_status st = copy_source(&t->eval, eval, "esmt_trainer_set_eval_source", "evaluation");
  if (st) return st;
  t->has_eval = 1;
  return ESMT_OK;
}

int64_t esmt_trainer_step_count(const esmt_trainer *t) { return t ? t->step : 0; }

int esmt_trainer_data_parallel(const esmt_trainer *t, char *buf, size_t cap) {
  const esmt_dp *dp = t ? t->dp : NULL;
  const int world = esmt_dp_world(dp);
  if (!buf || !cap) return world;
  buf[0] = '\0';
  if (!dp) return world;
  char how[640];
  esmt_comm_describe(esmt_dp_comm(dp), how, sizeof how);
  const int zero = esmt_dp_zero(dp);
  char zero_text[64], host[160] = "";
  snprintf(zero_text, sizeof zero_text, "reduce-scattered (ZeRO-%d)", zero);
  const esmt_param_memory *p = &t->m->mem;
  if (zero && p->offload) /* ZeRO with offload: what this rank's host holds */
    snprintf(host, sizeof host, "; optimizer offloaded: fp32 master, moments and gradients of "
             "[%llu, %llu) on this rank's host", (unsigned long long)p->master_lo,
             (unsigned long long)p->master_hi);
  snprintf(buf, cap, "%d rank%s, gradients %s %s%s%s", world, world == 1 ? "" : "s",
           zero ? zero_text : "summed",
           esmt_dp_on_device(dp) ? "on the device by " : "over ",
           esmt_dp_on_device(dp) ? t->m->ops->name : how, host);
  return world;
}

esmt_model *esmt_trainer_model(esmt_trainer *t) { return t ? t->m : NULL; }

void esmt_trainer_request_stop(esmt_trainer *t) {
  if (t) t->stop_requested = 1;
}

esmt_status esmt_trainer_set_dp(esmt_trainer *t, esmt_dp *dp) {
  esmt_dp_destroy(t->dp);
  t->dp = dp;
  t->up.dp = dp;
  esmt_status st = esmt_dp_check_start(dp, t->m);
  if (!st) st = esmt_dp_zero_start(dp, t->m);
  /* a forced one-rank group is unusual enough to show at the default level */
  if (!st && dp) {
    char how[800];
    esmt_trainer_data_parallel(t, how, sizeof how);
    esmt_logger_log(&t->m->ctx->logger, esmt_dp_world(dp) == 1 ? ESMT_LOG_WARN : ESMT_LOG_INFO,
                    "data parallel: rank %d of %d%s: %s", esmt_dp_rank(dp), esmt_dp_world(dp),
                    esmt_dp_world(dp) == 1 ? " (forced)" : "", how);
  }
  return st;
}

/* Copy a source batch into micro-batch slot i (sources may reuse buffers). */
static esmt_status keep_batch(esmt_trainer *t, int i, const esmt_batch *b) {
  if (i == t->mb_cap) {
    int cap = t->mb_cap ? 2 * t->mb_cap : 8;
    esmt_micro_batch *mbs = realloc(t->mbs, (size_t)cap * sizeof *mbs);
    if (!mbs) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    t->mbs = mbs;
    size_t *alloc = realloc(t->mb_alloc, (size_t)cap * sizeof *alloc);
    if (!alloc) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    t->mb_alloc = alloc;
    for (int k = t->mb_cap; k < cap; k++) {
      memset(&t->mbs[k], 0, sizeof t->mbs[k]);
      t->mb_alloc[k] = 0;
    }
    t->mb_cap = cap;
  }
  esmt_micro_batch *mb = &t->mbs[i];
  size_t n = (size_t)b->batch * (size_t)b->seq_len;
  if (n > t->mb_alloc[i]) {
    int32_t *tok = realloc(mb->tokens, n * sizeof *tok);
    if (tok) mb->tokens = tok;
    int32_t *lab = realloc(mb->labels, n * sizeof *lab);
    if (lab) mb->labels = lab;
    if (!tok || !lab) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    t->mb_alloc[i] = n;
  }
  const int nseg = b->struct_size >= sizeof *b ? b->num_segments : 0;
  if (nseg > mb->seg_cap) {
    int32_t *ss = realloc(mb->seg_start, (size_t)nseg * sizeof *ss);
    if (ss) mb->seg_start = ss;
    int32_t *sl = realloc(mb->seg_len, (size_t)nseg * sizeof *sl);
    if (sl) mb->seg_len = sl;
    if (!ss || !sl) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    mb->seg_cap = nseg;
  }
  mb->nseg = nseg;
  if (nseg > 0) {
    memcpy(mb->seg_start, b->seg_start, (size_t)nseg * sizeof *mb->seg_start);
    memcpy(mb->seg_len, b->seg_len, (size_t)nseg * sizeof *mb->seg_len);
  }
  mb->B = b->batch;
  mb->T = b->seq_len;
  memcpy(mb->tokens, b->tokens, n * sizeof *mb->tokens);
  if (b->labels) memcpy(mb->labels, b->labels, n * sizeof *mb->labels);
  else for (size_t k = 0; k < n; k++) mb->labels[k] = ESMT_LABEL_IGNORE;
  esmt_micro_batch_count(mb);
  esmt_status st = esmt_micro_batch_take_targets(mb, t->m, b);
  if (st) return st;
  /* Residue frequencies for the baseline: the original residue at each
   * real position (the label where the input was masked or replaced). */
  for (size_t k = 0; k < n; k++) {
    int32_t id = mb->labels[k] >= 0 ? mb->labels[k] : mb->tokens[k];
    if (id >= 4 && id < 29) t->aa_counts[id]++;
  }
  return ESMT_OK;
}

static esmt_status step_impl(esmt_trainer *t, esmt_train_metrics *out);

/* The micro-batch copies of one update hold 8 bytes (token and label) per
 * position, padding included: a tokens_per_update that cannot fit in what
 * is left of host memory is refused before any is gathered (it would grow
 * until the kernel kills the process). A lower bound: real tokens only. */
static esmt_status check_update_memory(esmt_trainer *t) {
  const uint64_t per_rank = t->o.tokens_per_update / (uint64_t)esmt_dp_world(t->dp);
  if (per_rank <= (1u << 20)) return ESMT_OK; /* a few MiB at most */
  char what[160];
  snprintf(what, sizeof what, "one update of tokens_per_update %llu (%llu tokens on this rank, "
           "8 bytes each for the micro-batch copies)", (unsigned long long)t->o.tokens_per_update,
           (unsigned long long)per_rank);
  const uint64_t need = per_rank > UINT64_MAX / 8 ? UINT64_MAX : per_rank * 8;
  esmt_status st = esmt_host_memory_check(need, what, "lower train.tokens_per_update (or use "
                                          "more data-parallel ranks)");
  return st ? esmt_fail_prefix(st, "esmt_trainer_step: ") : ESMT_OK;
}

/* A stop request while gathering: forget the micro-batches, put the source
 * and the residue counts back where the update started, and report the
 * stop; the last complete update is what a checkpoint now holds. */
static esmt_status rewind_update(esmt_trainer *t, const char *cursor,
                                 const uint64_t *counts_before, int gathered) {
  memcpy(t->aa_counts, counts_before, sizeof t->aa_counts);
  esmt_status st = t->train.restore_cursor(t->train.user, cursor);
  if (st) return esmt_fail_prefix(st, "esmt_trainer_step: rewinding the data after a stop: ");
  t->stop_requested = 1;
  return esmt_fail(ESMT_ERR_CANCELLED, "esmt_trainer_step: stopped on request while gathering "
                   "update %lld (%d micro-batches set aside, to be read again on resume)",
                   (long long)(t->step + 1), gathered);
}

/* Model FLOPs of one micro-batch (esmt_model_train_flops); packed rows
 * attend within each sequence, so attention counts sum(len^2) instead of
 * T^2 per row. */
static double micro_batch_flops(const esmt_model_config *cfg, const esmt_micro_batch *mb) {
  double f = 0;
  esmt_model_train_flops(cfg, mb->B, mb->T, &f);
  if (mb->nseg <= 0) return f;
  const double att = 12.0 * cfg->num_layers * cfg->hidden_size;
  double sq = 0;
  for (int s = 0; s < mb->nseg; s++) sq += (double)mb->seg_len[s] * mb->seg_len[s];
  return f - att * (double)mb->T * mb->T * mb->B + att * sq;
}

/* A failure here that the other ranks do not share (bad data, out of
 * memory) is announced to them, so they stop with this rank's reason
 * instead of waiting for it. Data exhaustion and numeric stops are
 * decided collectively (every rank sees the same sums). */
esmt_status esmt_trainer_step(esmt_trainer *t, esmt_train_metrics *out) {
  esmt_status st = t ? esmt_trainer_claim_run(t, "esmt_trainer_step") : ESMT_OK;
  if (!st && t) st = esmt_model_enter(t->m, "esmt_trainer_step"); /* one thread at a time */
  if (st) return st;
  st = step_impl(t, out);
  if (t) esmt_model_leave(t->m);
  if (st && t && t->dp && st != ESMT_ERR_STATE && st != ESMT_ERR_NUMERIC &&
      st != ESMT_ERR_CANCELLED)
    esmt_dp_abort(t->dp, esmt_last_error());
  if (st == ESMT_ERR_CANCELLED && !t->in_run) t->stop_requested = 0; /* consumed */
  return st;
}

/* ESMT_GEMM_CEILING_AUTO, after the first update (whose micro-batch shape
 * it uses): one warm-up and five timed products. MFU quoted against a
 * fixed 2048^3 fp32 product overstated it on GPUs (a bf16 run on an H100
 * read 92%, measured against TF32, at a speed where the bf16 ceiling gives
 * 57%). A failure leaves MFU unreported; training goes on. */
static void measure_ceiling(esmt_trainer *t) {
  t->ceiling_pending = 0;
  const int64_t tokens = t->mb_count > 0 ? (int64_t)t->mbs[0].B * t->mbs[0].T : 0;
  double g = 0;
  if (esmt_model_gemm_ceiling(t->m, tokens, 5, &g) == ESMT_OK)
    t->o.gemm_ceiling_gflops = g;
  else
    esmt_log(ESMT_LOG_WARN, "MFU not reported: measuring the GEMM ceiling failed: %s",
             esmt_last_error());
}

static esmt_status step_impl(esmt_trainer *t, esmt_train_metrics *out) {
  const char *fn = "esmt_trainer_step";
  ESMT_CHECK_ARG(t, fn, "trainer is NULL");
  if (out) {
    esmt_status st = esmt_check_struct(fn, "esmt_train_metrics", out->struct_size,
                                       offsetof(esmt_train_metrics, padding_fraction));
    if (st) return st;
  }
  double t0 = esmt_now_s();
  esmt_dp_set_step(t->dp, t->step + 1);
  esmt_status st = ESMT_OK;
  if (!t->update_memory_checked) {
    if ((st = check_update_memory(t))) return st;
    t->update_memory_checked = 1;
  }
  /* Where this update starts, to go back to if a stop request arrives
   * while its micro-batches are gathered (resume then repeats them). */
  uint64_t counts_before[ESMT_VOCAB_SIZE];
  memcpy(counts_before, t->aa_counts, sizeof counts_before);
  char cursor[8192] = "";
  const int can_rewind = t->train.save_cursor && t->train.restore_cursor &&
                         t->train.save_cursor(t->train.user, cursor, sizeof cursor) == ESMT_OK;
  /* Gather micro-batches until the update's token budget is reached. */
  uint64_t tokens = 0;
  int n = 0;
  do {
    /* One micro-batch per rank per round; the budget counts the tokens of
     * all ranks, and the data ends for all when it ends for one, as a stop
     * request does (between micro-batches, when the source can rewind). */
    esmt_batch b = ESMT_BATCH_INIT;
    st = t->train.next(t->train.user, &b);
    const int ended = st == ESMT_ERR_STATE;
    if (st && !ended) return esmt_fail_prefix(st, "%s: reading training batch: ", fn);
    if (!ended && (st = keep_batch(t, n, &b))) return st;
    uint64_t round[3] = {(uint64_t)ended, ended ? 0 : t->mbs[n].real_tokens,
                         (uint64_t)(can_rewind && t->stop_requested != 0)};
    if ((st = esmt_dp_sum_u64(t->dp, round, 3))) return st;
    if (round[2]) return rewind_update(t, cursor, counts_before, n + !ended);
    if (round[0]) break; /* the data ended */
    tokens += round[1];
    n++;
  } while (tokens < t->o.tokens_per_update);
  if (n == 0) return esmt_fail(ESMT_ERR_STATE, "%s: the training data is exhausted", fn);
  double t1 = esmt_now_s();
  esmt_update_result r;
  const double scale_used = t->scaler.scale;
  t->up.loss_scale = scale_used;
  t->up.scaling = t->scaler.enabled;
  st = esmt_run_update(t->m, t->mbs, n, &t->up, t->step + 1, t->adam_step + 1, &r);
  if (st) return esmt_fail_prefix(st, "%s: update %lld: ", fn, (long long)(t->step + 1));
  t->step++;
  if (r.skipped) {
    t->skipped++;
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "update %lld skipped: %s",
                    (long long)t->step, r.skip_reason);
  } else {
    t->adam_step++;
    t->last_finite_norm = r.grad_norm;
  }
  if (t->scaler.enabled && (r.overflow || !r.skipped)) {
    esmt_scaler_event ev = esmt_loss_scaler_update(&t->scaler, r.overflow);
    if (ev == ESMT_SCALER_BACKED_OFF || ev == ESMT_SCALER_GREW)
      esmt_logger_log(&t->m->ctx->logger, ev == ESMT_SCALER_GREW ? ESMT_LOG_DEBUG : ESMT_LOG_INFO,
                      "update %lld: loss scale %g -> %g", (long long)t->step, scale_used,
                      t->scaler.scale);
    if (ev == ESMT_SCALER_AT_FLOOR) {
      t->at_floor = 1;
      t->tokens += r.real_tokens;
      return esmt_fail(ESMT_ERR_NUMERIC,
                       "%s: update %lld: gradients overflow even at the loss-scale floor %g "
                       "(loss_scale.min; %lld overflows in a row, %lld in all; loss %g, last "
                       "finite gradient norm %g): the model is diverging or fp16 cannot hold "
                       "it. Lower optimizer.lr or train.grad_clip, or train in bf16/fp32",
                       fn, (long long)t->step, t->scaler.scale, (long long)t->scaler.consecutive,
                       (long long)t->scaler.overflows, r.loss, t->last_finite_norm);
    }
  }
  t->tokens += r.real_tokens;
  double t2 = esmt_now_s();
  if (out) {
    esmt_train_metrics mt;
    memset(&mt, 0, sizeof mt);
    mt.struct_size = out->struct_size;
    mt.step = t->step;
    mt.loss = r.loss;
    mt.lr = r.lr;
    mt.grad_norm = r.grad_norm;
    mt.tokens = t->tokens;
    mt.step_ms = 1e3 * (t2 - t0);
    mt.data_ms = 1e3 * (t1 - t0);
    mt.forward_ms = 1e3 * r.t_forward;
    mt.backward_ms = 1e3 * r.t_backward;
    mt.optimizer_ms = 1e3 * r.t_optimizer;
    mt.overhead_ms = mt.step_ms - mt.data_ms - mt.forward_ms - mt.backward_ms - mt.optimizer_ms;
    mt.tokens_per_s = (double)r.real_tokens / (t2 - t0);
    if (t->ceiling_pending) measure_ceiling(t); /* after t2: not in this step's time */
    if (t->o.gemm_ceiling_gflops > 0) {
      double flops = 0;
      for (int i = 0; i < n; i++) flops += micro_batch_flops(&t->m->cfg, &t->mbs[i]);
      mt.mfu = flops / (t2 - t0) / 1e9 / t->o.gemm_ceiling_gflops;
    }
    mt.elapsed_s = t->elapsed_before + (t2 - t->t_start);
    if (t->o.max_steps > t->step)
      mt.eta_s = (double)(t->o.max_steps - t->step) * (t2 - t0);
    mt.skipped = t->skipped;
    mt.loss_scale = scale_used;
    mt.overflows = t->scaler.overflows;
    uint64_t real = 0, positions = 0;
    for (int i = 0; i < n; i++) {
      real += t->mbs[i].real_tokens;
      positions += (uint64_t)t->mbs[i].B * (uint64_t)t->mbs[i].T;
    }
    mt.padding_fraction = positions ? 1.0 - (double)real / (double)positions : 0.0;
    esmt_device_stats_fill(&t->devstats, t->m->ops, t->m->dev, &t->m->ctx->logger, &mt);
    memcpy(out, &mt, out->struct_size < sizeof mt ? out->struct_size : sizeof mt);
  }
  return ESMT_OK;
}

/* host: the gathered master weights and moments (esmt_checkpoint_save_with's
 * host_w, host_m, host_v), or NULL: the model's own */
static esmt_status save_here(esmt_trainer *t, char *path, size_t cap, float *const *host);
static esmt_status save_files(esmt_trainer *t, char *path, size_t cap, float *const *host);

/* ZeRO: every rank's moments into rank 0's host buffers (all ranks take
 * part; the others' hold a shard), and under a sharded master the master
 * weights too (hw). */
static esmt_status gather_moments(esmt_trainer *t, float **hw, float **hm, float **hv) {
  *hw = *hm = *hv = NULL;
  if (!esmt_dp_zero(t->dp)) return ESMT_OK;
  const uint64_t n = esmt_dp_zero_save_elems(t->dp, t->m->layout.total);
  if (esmt_param_master_sharded(&t->m->mem)) {
    *hw = malloc((n ? n : 1) * sizeof **hw);
    if (!*hw)
      return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_trainer_save: ZeRO-2: no host memory to "
                       "gather the master weights (%llu bytes)",
                       (unsigned long long)(n * sizeof(float)));
    esmt_status st = esmt_dp_zero_gather_master(t->dp, t->m, *hw);
    if (st) return st;
  }
  const int nstate = esmt_optimizer_state_count(t->m->cfg.optimizer); /* Lion: m only */
  *hm = malloc((n ? n : 1) * sizeof **hm);
  if (nstate > 1) *hv = malloc((n ? n : 1) * sizeof **hv);
  /* a rank without the memory cannot take part: it fails, and its abort
   * reaches the others in the gather */
  if (!*hm || (nstate > 1 && !*hv))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_trainer_save: ZeRO-1: no host memory to "
                     "gather the moments (%llu bytes)",
                     (unsigned long long)(nstate * n * sizeof(float)));
  return esmt_dp_zero_gather_moments(t->dp, t->m, *hm, *hv);
}

/* Data parallel: rank 0 writes (every rank holds the same weights; under
 * ZeRO-1 the moments are gathered first) and all ranks learn whether it
 * worked. */
static esmt_status save_all(esmt_trainer *t, char *path, size_t cap);

esmt_status esmt_trainer_save(esmt_trainer *t, char *path, size_t cap) {
  ESMT_CHECK_ARG(t, "esmt_trainer_save", "trainer is NULL");
  esmt_status st = save_all(t, path, cap);
  if (!st) t->last_saved_step = t->step;
  return st;
}

static esmt_status save_all(esmt_trainer *t, char *path, size_t cap) {
  const char *fn = "esmt_trainer_save";
  if (!t->run_dir) return esmt_fail(ESMT_ERR_STATE, "%s: no run_dir was configured", fn);
  esmt_status claimed = esmt_trainer_claim_run(t, fn);
  if (claimed) return claimed;
  if (!t->dp) return save_here(t, path, cap, NULL);
  float *hw = NULL, *hm = NULL, *hv = NULL;
  esmt_status st = gather_moments(t, &hw, &hm, &hv);
  float *const host[3] = {hw, hm, hv};
  if (st) {
    free(hw);
    free(hm);
    free(hv);
    esmt_dp_abort(t->dp, esmt_last_error());
    return st;
  }
  char why[1024] = "";
  if (esmt_dp_rank(t->dp) == 0 && (st = save_here(t, path, cap, host)))
    snprintf(why, sizeof why, "%s", esmt_last_error());
  else if (esmt_dp_rank(t->dp) != 0 && path)
    snprintf(path, cap, "%s/checkpoints/step-%08lld", t->run_dir, (long long)t->step);
  free(hw);
  free(hm);
  free(hv);
  uint64_t failed = st != ESMT_OK;
  esmt_status cs = esmt_dp_sum_u64(t->dp, &failed, 1);
  if (st) return esmt_fail(st, "%s", why);
  if (cs) return cs;
  if (failed) return esmt_fail(ESMT_ERR_IO, "%s: rank 0 could not save the checkpoint", fn);
  return ESMT_OK;
}

static esmt_status save_here(esmt_trainer *t, char *path, size_t cap, float *const *host) {
  /* stage "save": 0 of 1 checkpoints before, 1 after (a checkpoint write is
   * not cancelled half-way: the callback's answer is ignored here) */
  esmt_progress pr = {sizeof pr, "save", 0, 1, "checkpoints", 0.0, (uint64_t)t->step};
  const double start = esmt_now_s();
  (void)esmt_report_progress(t->m->ctx, t->o.progress, t->o.progress_user, &pr);
  esmt_status st = save_files(t, path, cap, host);
  pr.done = st == ESMT_OK;
  pr.elapsed_s = esmt_now_s() - start;
  (void)esmt_report_progress(t->m->ctx, t->o.progress, t->o.progress_user, &pr);
  return st;
}

static esmt_status save_files(esmt_trainer *t, char *path, size_t cap, float *const *host) {
  const char *fn = "esmt_trainer_save";
  char *json = NULL;
  esmt_status st = esmt_trainer_state_to_json(t, &json);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  char dir[4096];
  st = esmt_checkpoint_save_with(t->m, t->run_dir, t->step, json, t->o.keep_last,
                                 host ? host[0] : NULL, host ? host[1] : NULL,
                                 host ? host[2] : NULL, dir, sizeof dir);
  free(json);
  if (st) return st;
  if (path) snprintf(path, cap, "%s", dir);
  esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "checkpoint saved: %s", dir);
  return ESMT_OK;
}

static esmt_status load_checkpoint(esmt_trainer *t, const char *spec, int full, const char *fn) {
  ESMT_CHECK_ARG(t && spec, fn, "trainer and checkpoint must not be NULL");
  /* a resume takes the run first: its checkpoints are read under run.lock */
  esmt_status st = full ? esmt_trainer_resume_run(t, spec, fn) : ESMT_OK;
  if (st) return st;
  char dir[4096];
  if ((st = esmt_checkpoint_resolve(spec, dir, sizeof dir))) return esmt_fail_prefix(st, "%s: ", fn);
  if (full && (st = esmt_trainer_resume_check(t, dir))) return esmt_fail_prefix(st, "%s: ", fn);
  char *json = NULL;
  st = esmt_checkpoint_load(t->m, dir, full, full ? &json : NULL);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  if (full) {
    st = esmt_trainer_state_from_json(t, json);
    free(json);
    if (st) return esmt_fail_prefix(st, "%s: %s: ", fn, dir);
    t->t_start = esmt_now_s();
    /* the metrics files open again at the resumed step (dropping later ones) */
    if (t->sink && esmt_metrics_sink_close(t->sink))
      esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_WARN, "metrics files: %s", esmt_last_error());
    t->sink = NULL;
    t->sink_opened = 0;
    t->sink_start_step = t->step;
  }
  esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "%s %s (step %lld)",
                  full ? "resumed from" : "weights loaded from", dir, (long long)t->step);
  return ESMT_OK;
}

esmt_status esmt_trainer_resume(esmt_trainer *t, const char *spec) {
  return load_checkpoint(t, spec, 1, "esmt_trainer_resume");
}

esmt_status esmt_trainer_init_from(esmt_trainer *t, const char *spec) {
  ESMT_CHECK_ARG(t && spec, "esmt_trainer_init_from", "trainer and checkpoint must not be NULL");
  if (t->m->cfg.head != ESMT_HEAD_NONE || t->m->cfg.lora_rank > 0) { /* a pre-trained encoder */
    esmt_status st = esmt_trainer_init_encoder(t, spec);
    return st ? esmt_fail_prefix(st, "esmt_trainer_init_from: ") : ESMT_OK;
  }
  if (strncmp(spec, "hf:", 3) == 0) {
    esmt_status st = esmt_model_load_hf(t->m, spec + 3);
    if (st) return esmt_fail_prefix(st, "esmt_trainer_init_from: ");
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "weights loaded from %s", spec + 3);
    return ESMT_OK;
  }
  return load_checkpoint(t, spec, 0, "esmt_trainer_init_from");
}

static int progress_cancel(esmt_trainer *t) {
  esmt_progress p = ESMT_PROGRESS_INIT;
  p.stage = "train";
  p.done = (uint64_t)t->step;
  p.total = t->o.max_steps > 0 ? (uint64_t)t->o.max_steps : 0;
  p.unit = "steps";
  p.elapsed_s = t->elapsed_before + (esmt_now_s() - t->t_start);
  p.items = t->tokens;
  return esmt_report_progress(t->m->ctx, t->o.progress, t->o.progress_user, &p);
}

/* A checkpoint of the current step unless this run wrote it already (an
 * evaluation that found a best, then save_every, then the end of the run
 * all land on one step); its directory into dir. */
static esmt_status save_once(esmt_trainer *t, char *dir, size_t cap) {
  if (t->last_saved_step == t->step) {
    if (dir) snprintf(dir, cap, "%s/checkpoints/step-%08lld", t->run_dir, (long long)t->step);
    return ESMT_OK;
  }
  return esmt_trainer_save(t, dir, cap);
}

/* Evaluate, report, and keep the best checkpoint. */
static esmt_status eval_and_report(esmt_trainer *t) {
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  esmt_status st = esmt_trainer_evaluate_in_run(t, &em);
  if (st) return st;
  if (t->o.metrics) t->o.metrics(t->o.metrics_user, NULL, &em);
  esmt_trainer_write_metrics(t, NULL, &em);
  int best, stop;
  if ((st = esmt_task_eval_judge(t, &em, &best, &stop))) return st;
  if (em.loss < t->best_eval_loss) t->best_eval_loss = em.loss;
  if (t->run_dir && best) {
    char dir[4096];
    if ((st = save_once(t, dir, sizeof dir))) return st;
    if (esmt_dp_rank(t->dp) == 0 && (st = esmt_checkpoint_mark_best(t->run_dir, dir))) return st;
  }
  if (stop) {
    t->early_stopped = 1;
    esmt_logger_log(&t->m->ctx->logger, ESMT_LOG_INFO, "early stop at step %lld: %d evaluations "
                    "without a better %s", (long long)t->step, t->o.patience, t->best_metric);
  }
  return ESMT_OK;
}

/* The loss scale hit its floor: every overflowing update was skipped, so
 * the weights are sound; save them (resumable) and stop with the step's
 * diagnostics plus where the checkpoint is. */
static esmt_status save_at_floor(esmt_trainer *t) {
  char why[1024];
  snprintf(why, sizeof why, "%s", esmt_last_error());
  if (!t->run_dir) return esmt_fail(ESMT_ERR_NUMERIC, "%s", why);
  char dir[4096];
  esmt_status st = esmt_trainer_save(t, dir, sizeof dir);
  if (st)
    return esmt_fail(ESMT_ERR_NUMERIC, "%s; saving a checkpoint failed too: %s", why,
                     esmt_last_error());
  return esmt_fail(ESMT_ERR_NUMERIC, "%s; checkpoint saved: %s", why, dir);
}

static esmt_status run_impl(esmt_trainer *t);

esmt_status esmt_trainer_run(esmt_trainer *t) {
  ESMT_CHECK_ARG(t, "esmt_trainer_run", "trainer is NULL");
  esmt_status st = esmt_trainer_claim_run(t, "esmt_trainer_run");
  if (st) return st;
  t->in_run = 1;
  st = run_impl(t);
  t->in_run = 0;
  t->run_deadline = 0;
  if (st == ESMT_ERR_CANCELLED) t->stop_requested = 0; /* consumed by the run it stopped */
  if (st && t->dp && st != ESMT_ERR_NUMERIC && st != ESMT_ERR_CANCELLED)
    esmt_dp_abort(t->dp, esmt_last_error()); /* a no-op when the step already did */
  return st;
}

static esmt_status run_impl(esmt_trainer *t) {
  esmt_status st = ESMT_OK;
  int cancelled = 0, evaluated_at = -1, timed_out = 0;
  double run_start = esmt_now_s();
  t->run_deadline = t->o.max_time_s > 0 ? run_start + t->o.max_time_s : 0;
  while ((t->o.max_steps == 0 || t->step < t->o.max_steps) && !t->stop_requested) {
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    st = esmt_trainer_step(t, &mt);
    if (st == ESMT_ERR_STATE && t->o.max_steps == 0) { st = ESMT_OK; break; } /* data done */
    if (st == ESMT_ERR_CANCELLED) { st = ESMT_OK; break; } /* stopped inside an update */
    if (st && t->at_floor) return save_at_floor(t);
    if (st) return st; /* the last saved checkpoint stays the good one */
    if (t->o.log_every > 0 && (t->step % t->o.log_every == 0 || t->step == t->o.max_steps)) {
      if (t->o.metrics) t->o.metrics(t->o.metrics_user, &mt, NULL);
      esmt_trainer_write_metrics(t, &mt, NULL);
    }
    if (t->has_eval && t->o.eval_every > 0 && t->step % t->o.eval_every == 0) {
      /* an evaluation cut short by a stop or the deadline: the run ends
       * here, with its checkpoint, as after any update */
      st = eval_and_report(t);
      if (st && st != ESMT_ERR_CANCELLED) return st;
      evaluated_at = (int)t->step;
      if (st) timed_out = !t->stop_requested;
      st = ESMT_OK;
      if (t->early_stopped) timed_out = 1; /* every rank ends after this update */
    }
    if (t->run_dir && t->o.save_every > 0 && t->step % t->o.save_every == 0 &&
        (st = save_once(t, NULL, 0)))
      return st;
    if (progress_cancel(t)) t->stop_requested = 1;
    /* every rank stops after the same update */
    uint64_t stop[2] = {t->stop_requested != 0,
                        timed_out || (t->o.max_time_s > 0 &&
                                      esmt_now_s() - run_start >= t->o.max_time_s)};
    if ((st = esmt_dp_sum_u64(t->dp, stop, 2))) return st;
    if (stop[0]) t->stop_requested = 1;
    if (stop[1]) break;
  }
  cancelled = t->stop_requested != 0;
  if (!cancelled && t->has_eval && t->o.eval_every > 0 && evaluated_at != (int)t->step) {
    st = eval_and_report(t);
    if (st && st != ESMT_ERR_CANCELLED) return st;
    cancelled = t->stop_requested != 0;
  }
  if (t->run_dir && (st = save_once(t, NULL, 0))) return st;
  if (cancelled)
    return esmt_fail(ESMT_ERR_CANCELLED, "esmt_trainer_run: stopped on request at step %lld "
                     "(checkpoint saved)", (long long)t->step);
  return ESMT_OK;
}
