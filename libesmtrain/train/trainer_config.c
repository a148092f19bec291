/* SPDX-License-Identifier: MIT */
/* esmt_trainer_create_from_config: configuration keys -> model, loaders
 * and trainer (the one place that maps the schema onto objects). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_table.h"
#include "config_read.h"
#include "host_memory.h"
#include "dataset_manifest.h"
#include "offload.h"
#include "trainer.h"
#include "optimizer.h"

/* train.overfit_batches: the first N batches of a loader, over and over. */
typedef struct esmt_overfit_source {
  esmt_loader *loader;
  int64_t n, served;
} esmt_overfit_source;

static esmt_status overfit_next(void *u, esmt_batch *b) {
  esmt_overfit_source *o = u;
  if (o->served == o->n) {
    esmt_status st = esmt_loader_reset(o->loader);
    if (st) return st;
    o->served = 0;
  }
  o->served++;
  return esmt_loader_next(o->loader, b);
}

/* backend.precision -> esmt_model_config.precision (the schema's enum). */
esmt_precision esmt_cfg_precision(struct esmt_config_reader *rd) {
  const char *p = esmt_cfg_string(rd, "backend.precision");
  return !strcmp(p, "fp32") ? ESMT_PRECISION_FP32
       : !strcmp(p, "fp16") ? ESMT_PRECISION_FP16
       : !strcmp(p, "bf16") ? ESMT_PRECISION_BF16 : ESMT_PRECISION_AUTO;
}

esmt_status esmt_trainer_config_begin(const char *fn, const esmt_context *ctx,
                                      const esmt_config *cfg, esmt_trainer **out,
                                      esmt_config_reader *rd) {
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(ctx && cfg, fn, "ctx and cfg must not be NULL");
  esmt_status st = esmt_config_validate(cfg);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  esmt_cfg_reader_init(rd, cfg);
  return ESMT_OK;
}

/* The micro-batch shape the planner sees: data.micro_batch rows (or
 * data.tokens_per_batch / data.max_len, rounded up: the loader's greedy
 * batches hold up to tokens_per_batch tokens in any shape, and the arena
 * depends on the token count only) of data.max_len tokens. */
static void planned_shape(esmt_config_reader *rd, int *B, int *T) {
  *T = (int)esmt_cfg_int(rd, "data.max_len");
  *B = (int)esmt_cfg_int(rd, "data.micro_batch");
  if (!*B && *T > 0) *B = (int)((esmt_cfg_int(rd, "data.tokens_per_batch") + *T - 1) / *T);
  if (*B < 1) *B = 1;
}

static int policy_of(esmt_config_reader *rd, const char *key) { /* -1 auto, 0 off, 1 on */
  const char *v = esmt_cfg_string(rd, key);
  return !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
}

/* The memory policy: offload.optimizer and offload.recompute (on, off, or
 * auto = what the memory planner picks for backend.device_memory_limit at
 * this shape: the cheapest of none, recompute, offload, both that fits; no
 * limit: off), offload.pinned_memory_limit, and the limit itself, which the
 * model's backend enforces. The planner request is esmt_config_plan_request's,
 * as for `plan`, `config --validate` and `train --validate`. */
static esmt_status memory_policy(esmt_context *ctx, esmt_config_reader *rd, int zero,
                                 esmt_offload_options *o) {
  memset(o, 0, sizeof *o);
  const uint64_t budget = esmt_cfg_bytes(rd, "backend.device_memory_limit");
  o->pinned_limit = esmt_cfg_bytes(rd, "offload.pinned_memory_limit");
  /* the host's share: what the machine has, unless said (swap, a file-backed store) */
  const uint64_t host_limit = esmt_cfg_bytes(rd, "offload.host_memory_limit");
  o->device_memory_limit = budget;
  int off = policy_of(rd, "offload.optimizer");
  const int rec = policy_of(rd, "offload.recompute");
  int stream = esmt_config_stream_level(esmt_cfg_string(rd, "offload.stream"));
  esmt_status st = esmt_cfg_status(rd, "memory policy");
  if (st) return st;
  if (zero && off < 0) { /* ZeRO was asked for by name; offload by name combines (dp_zero.c) */
    esmt_logger_log(&ctx->logger, ESMT_LOG_INFO,
                    "offload.optimizer auto: off (dist.zero %d shards the optimizer state "
                    "instead)", zero);
    off = 0;
  }
  if (stream > 0 && off < 0) off = 1; /* streaming sits on the optimizer's host side */
  if (stream < 0 && (zero || off == 0)) stream = ESMT_STREAM_NONE;
  o->enabled = off == 1;
  o->recompute = rec == 1;
  o->streamed = stream > 0 ? stream : ESMT_STREAM_NONE;
  /* the request `plan`, `config --validate` and `train --validate` make */
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request pr = ESMT_PLAN_REQUEST_INIT;
  esmt_plan plan = ESMT_PLAN_INIT;
  if ((off >= 0 && rec >= 0 && stream >= 0) || !budget) { /* auto, no budget: off */
    if (!o->enabled) return ESMT_OK;
    /* offload by name: its host buffers must fit the host, said before any is taken */
    if ((st = esmt_config_plan_request(rd->cfg, ctx, &mc, &pr))) return st;
    pr.offload_optimizer = 1;
    pr.recompute = o->recompute;
    pr.stream = o->streamed;
    pr.device_budget = 0;
    if ((st = esmt_plan_memory(&pr, &plan))) return st;
    if (host_limit)
      return plan.host_pinned <= host_limit ? ESMT_OK
             : esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "the offloaded weights, gradients and optimizer "
                         "state need %.1f GiB of host memory, above offload.host_memory_limit "
                         "%.1f GiB", (double)plan.host_pinned / 1073741824.0,
                         (double)host_limit / 1073741824.0);
    return esmt_host_memory_check(plan.host_pinned, "the offloaded weights, gradients and "
                                  "optimizer state", "use optimizer.kind lion (one moment instead "
                                  "of two), a smaller model, or offload.optimizer off");
  }
  if ((st = esmt_config_plan_request(rd->cfg, ctx, &mc, &pr))) return st;
  pr.offload_optimizer = off;
  pr.recompute = rec;
  pr.stream = stream;
  esmt_host_memory hm; /* a policy whose host buffers the machine cannot hold does not fit */
  esmt_host_memory_probe(&hm);
  pr.host_budget = hm.available == UINT64_MAX ? 0 : hm.available;
  if (host_limit) {
    pr.host_budget = host_limit;
    snprintf(hm.limited_by, sizeof hm.limited_by, "offload.host_memory_limit");
  }
  st = esmt_plan_memory(&pr, &plan);
  if (st && st != ESMT_ERR_OUT_OF_MEMORY) return st;
  if (st && plan.offload_optimizer && pr.host_budget && plan.host_pinned > pr.host_budget)
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "memory policy auto for backend.device_memory_limit "
                     "%.2f GiB: %s (limited by %s)", (double)budget / 1073741824.0, plan.advice,
                     hm.limited_by);
  esmt_clear_error();
  /* Nothing fits: the smallest plan; if its allocation fails, that says what to change. */
  o->enabled = plan.offload_optimizer;
  o->recompute = plan.recompute;
  o->streamed = plan.stream;
  static const char *const levels[] = {"off", "gradients", "weights"};
  esmt_logger_log(&ctx->logger, plan.fits ? ESMT_LOG_INFO : ESMT_LOG_WARN,
                  "memory policy auto: offload.optimizer %s, offload.recompute %s, "
                  "offload.stream %s for backend.device_memory_limit %.2f GiB (%s)",
                  o->enabled ? "on" : "off", o->recompute ? "on" : "off", levels[o->streamed],
                  (double)budget / 1073741824.0, plan.advice);
  return ESMT_OK;
}

/* data.pack -> loader packing: auto packs on a backend with packed-row
 * support that is not host memory (GPUs; on the CPU the padding a length-
 * sorted batch carries costs little); on without support is an error. */
static esmt_status pack_policy(esmt_context *ctx, esmt_config_reader *rd, int *pack) {
  const char *p = esmt_cfg_string(rd, "data.pack");
  const esmtb_ops *ops = ctx->backend->ops;
  *pack = 0;
  if (!strcmp(p, "off")) return ESMT_OK;
  if (!strcmp(p, "on")) {
    esmt_status st = esmt_packing_supported(ops);
    if (st) return esmt_fail_prefix(st, "data.pack is on, but ");
    *pack = 1;
    return ESMT_OK;
  }
  *pack = (ops->caps & ESMTB_CAP_VARLEN) &&
          !(ops->caps & ESMTB_CAP_HOST_ADDRESSABLE);
  return ESMT_OK;
}

/* data.sampling -> the loader's: auto is cluster when the dataset was
 * ingested with clusters. Says what validation holds. */
static esmt_status sampling_policy(esmt_context *ctx, esmt_config_reader *rd, const char *data,
                                   int *sampling) {
  const char *want = esmt_cfg_string(rd, "data.sampling");
  esmt_dataset_manifest m;
  esmt_status st = esmt_manifest_load(data, &m);
  if (st) return st;
  const int has = m.clusters[ESMT_SPLIT_TRAIN].file != NULL;
  *sampling = !strcmp(want, "cluster") || (!strcmp(want, "auto") && has)
                  ? ESMT_SAMPLING_CLUSTER : ESMT_SAMPLING_SEQUENCE;
  if (has)
    esmt_logger_log(&ctx->logger, ESMT_LOG_INFO, "data: sampling by %s (%llu training clusters); "
                    "validation holds out %llu whole clusters",
                    *sampling ? "cluster, then a member" : "sequence",
                    (unsigned long long)m.clusters[ESMT_SPLIT_TRAIN].clusters,
                    (unsigned long long)m.clusters[ESMT_SPLIT_VALID].clusters);
  else if (!*sampling)
    esmt_logger_log(&ctx->logger, ESMT_LOG_INFO, "data: sampling by sequence; the validation "
                    "split is by record and may hold near-duplicates of training proteins "
                    "(ingest --clusters holds out whole clusters)");
  esmt_manifest_free(&m);
  return ESMT_OK; /* cluster without clusters: the loader says what to do */
}

esmt_status esmt_trainer_options_from_config(struct esmt_config_reader *rd,
                                            const esmt_trainer_options *base,
                                            const esmt_model *model, esmt_optimizer_kind optimizer,
                                            int64_t steps, int64_t eval_every, int no_run_dir,
                                            const char *fn, esmt_trainer_config_options *out) {
  esmt_trainer_options *to = &out->to;
  *to = (esmt_trainer_options)ESMT_TRAINER_OPTIONS_INIT;
  if (base) {
    esmt_status st = esmt_check_struct(fn, "esmt_trainer_options", base->struct_size,
                                       offsetof(esmt_trainer_options, metrics_files_off));
    if (st) return st;
    if (base->struct_size >= sizeof *base) to->metrics_files_off = base->metrics_files_off;
    to->metrics = base->metrics;
    to->metrics_user = base->metrics_user;
    to->progress = base->progress;
    to->progress_user = base->progress_user;
    to->gemm_ceiling_gflops = base->gemm_ceiling_gflops;
    to->config_text = base->config_text;
  }
  const char *out_dir = esmt_cfg_string(rd, "train.out_dir");
  to->run_dir = no_run_dir || !*out_dir ? NULL : out_dir;
  to->max_steps = steps;
  to->tokens_per_update = (uint64_t)esmt_cfg_int(rd, "train.tokens_per_update");
  /* the structs the options point to (esmt_trainer_create copies them) */
  esmt_optimizer_config *oc = &out->oc;
  esmt_schedule *sc = &out->sc;
  esmt_loss_scale_config *lc = &out->lc;
  *oc = (esmt_optimizer_config)ESMT_OPTIMIZER_CONFIG_INIT;
  *sc = (esmt_schedule)ESMT_SCHEDULE_INIT;
  *lc = (esmt_loss_scale_config)ESMT_LOSS_SCALE_CONFIG_INIT;
  oc->kind = optimizer;
  oc->beta1 = esmt_cfg_double(rd, "optimizer.beta1");
  oc->beta2 = esmt_cfg_double(rd, "optimizer.beta2");
  oc->eps = esmt_cfg_double(rd, "optimizer.eps");
  oc->weight_decay = esmt_cfg_double(rd, "optimizer.weight_decay");
  oc->decay_biases_and_norms = esmt_cfg_bool(rd, "optimizer.decay_biases_and_norms");
  const char *kind = esmt_cfg_string(rd, "schedule.kind");
  sc->kind = !strcmp(kind, "cosine") ? ESMT_SCHEDULE_COSINE
          : !strcmp(kind, "constant") ? ESMT_SCHEDULE_CONSTANT : ESMT_SCHEDULE_ESM2;
  sc->peak_lr = esmt_cfg_double(rd, "optimizer.lr"); /* the one learning-rate key */
  sc->warmup_steps = esmt_cfg_int(rd, "schedule.warmup_steps");
  sc->total_steps = steps;
  sc->final_lr_fraction = esmt_cfg_double(rd, "schedule.final_lr_fraction");
  sc->decay_end_fraction = esmt_cfg_double(rd, "schedule.decay_end_fraction");
  to->optimizer = oc;
  to->schedule = sc;
  to->grad_clip = esmt_cfg_double(rd, "train.grad_clip");
  to->nonfinite_abort = !strcmp(esmt_cfg_string(rd, "train.nonfinite"), "abort");
  const char *ls = esmt_cfg_string(rd, "loss_scale.enabled");
  lc->enabled = !strcmp(ls, "on") || (!strcmp(ls, "auto") && model->dtype == ESMTB_F16);
  lc->initial = esmt_cfg_double(rd, "loss_scale.initial");
  lc->growth_interval = esmt_cfg_int(rd, "loss_scale.growth_interval");
  lc->backoff = esmt_cfg_double(rd, "loss_scale.backoff");
  lc->hysteresis = (int)esmt_cfg_int(rd, "loss_scale.hysteresis");
  lc->min = esmt_cfg_double(rd, "loss_scale.min");
  to->loss_scale = lc;
  to->log_every = (int)esmt_cfg_int(rd, "train.log_every");
  to->eval_every = (int)eval_every;
  to->eval_batches = (int)esmt_cfg_int(rd, "train.eval_batches");
  to->save_every = (int)esmt_cfg_int(rd, "train.save_every");
  to->keep_last = (int)esmt_cfg_int(rd, "train.keep_last");
  to->max_time_s = esmt_cfg_double(rd, "train.max_time");
  return esmt_cfg_status(rd, fn);
}

esmt_status esmt_trainer_create_from_config(esmt_context *ctx, const esmt_config *cfg,
                                            const esmt_trainer_options *base,
                                            esmt_trainer **out) {
  const char *fn = "esmt_trainer_create_from_config";
  esmt_config_reader reader, *rd = &reader; /* a mistyped key fails loudly */
  esmt_status st = esmt_trainer_config_begin(fn, ctx, cfg, out, rd);
  if (st) return st;
  const char *data = esmt_cfg_string(rd, "data.train_dir");
  if (!*data) return esmt_fail(ESMT_ERR_CONFIG, "%s: data.train_dir is not set", fn);
  const int64_t fast_dev = esmt_cfg_int(rd, "train.fast_dev_run"), overfit = esmt_cfg_int(rd, "train.overfit_batches");
  const int64_t steps = fast_dev > 0 ? fast_dev : esmt_cfg_int(rd, "train.max_steps");

  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_cfg_model_shape(rd, &mc);
  mc.precision = esmt_cfg_precision(rd);
  const char *opt_kind = esmt_cfg_string(rd, "optimizer.kind");
  const uint64_t bucket = esmt_cfg_bytes(rd, "dist.bucket_size");
  const int force_dp = esmt_cfg_bool(rd, "dist.force");
  const char *comm_name = esmt_cfg_string(rd, "dist.comm");
  const esmt_comm_kind comm = strcmp(comm_name, "tcp") == 0   ? ESMT_COMM_TCP
                              : strcmp(comm_name, "mpi") == 0 ? ESMT_COMM_MPI
                                                              : ESMT_COMM_AUTO;
  if ((st = esmt_cfg_status(rd, fn))) return st;
  if ((st = esmt_optimizer_from_name(opt_kind, &mc.optimizer)))
    return esmt_fail_prefix(st, "%s: ", fn);
  esmt_model *model = NULL;
  esmt_loader *train = NULL, *valid = NULL;
  esmt_overfit_source *ovf = NULL;
  esmt_trainer *t = NULL;
  esmt_dp *dp = NULL; /* data parallel when a launcher set ranks */
  if ((st = esmt_dp_create_from_env(bucket, force_dp, comm, &dp))) return esmt_fail_prefix(st, "%s: ", fn);
  const int zero = dp ? (int)esmt_cfg_int(rd, "dist.zero") : 0; /* alone: nothing to shard */
  esmt_dp_set_zero(dp, zero);
  esmt_offload_options oo;
  int pack = 0, sampling = 0;
  if ((st = pack_policy(ctx, rd, &pack))) goto fail;
  if ((st = sampling_policy(ctx, rd, data, &sampling))) goto fail;
  if ((st = memory_policy(ctx, rd, zero, &oo))) goto fail;
  if (dp && oo.streamed) { /* the all-reduce reads the device gradients whole */
    st = esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: offload.stream %s does not run with data "
                   "parallelism yet (its ranks all-reduce gradients the device no longer "
                   "holds): use one process, or offload.stream off (dist.zero 1, 2 or 3 combine "
                   "with offload.optimizer on: each rank's shard on its host)", fn,
                   oo.streamed == ESMT_STREAM_WEIGHTS ? "weights" : "gradients");
    goto fail;
  }
  if (dp && zero) { /* the shards only, from the start (device or host): no whole buffer peaks */
    oo.zero_level = zero;
    oo.zero_rank = esmt_dp_rank(dp);
    oo.zero_world = esmt_dp_world(dp);
  }
  if ((st = esmt_model_create_with(ctx, &mc, (uint64_t)esmt_cfg_int(rd, "train.seed"), &oo, &model)))
    goto fail;
  if (!esmt_cfg_bool(rd, "backend.deterministic")) {
    esmt_model_set_deterministic(model, 0);
    esmt_logger_log(&ctx->logger, ESMT_LOG_INFO,
                    "backend.deterministic false: the attention backward may differ in the last "
                    "bits from run to run (atomic dQ on GPU backends)");
  }
  if (oo.device_memory_limit) { /* the planned arena now: out of memory here, not at step n */
    int rows, len;
    planned_shape(rd, &rows, &len);
    if ((st = esmt_model_reserve(model, rows, len))) {
      esmt_fail_prefix(st, "%s: ", fn);
      goto fail;
    }
  }

  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
  lo.dir = data;
  lo.seed = (uint64_t)esmt_cfg_int(rd, "data.seed");
  lo.max_len = (int)esmt_cfg_int(rd, "data.max_len");
  lo.batch_rows = (int)esmt_cfg_int(rd, "data.micro_batch");
  lo.tokens_per_batch = (uint64_t)esmt_cfg_int(rd, "data.tokens_per_batch");
  lo.prefetch = (int)esmt_cfg_int(rd, "data.prefetch");
  lo.mask_prob = esmt_cfg_double(rd, "data.mask_prob");
  lo.pack = pack;
  lo.sampling = sampling;
  lo.rank = esmt_dp_rank(dp);
  lo.world = esmt_dp_world(dp);
  if (overfit > 0) lo.shuffle = 0;
  if ((st = esmt_cfg_status(rd, fn))) goto fail;
  if ((st = esmt_loader_create(&lo, &train))) goto fail;
  const int64_t eval_every = fast_dev > 0 ? 0 : esmt_cfg_int(rd, "train.eval_every");
  if (eval_every > 0) {
    esmt_loader_options vo = lo;
    vo.split = ESMT_SPLIT_VALID;
    vo.sampling = ESMT_SAMPLING_SEQUENCE; /* every held-out protein, in file order */
    vo.shuffle = 0;
    vo.fixed_masking = 1;
    vo.epochs = 1;
    if ((st = esmt_loader_create(&vo, &valid))) goto fail;
  }
  esmt_batch_source src;
  esmt_loader_as_source(train, &src);
  if (overfit > 0) {
    ovf = calloc(1, sizeof *ovf);
    if (!ovf) { st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn); goto fail; }
    ovf->loader = train;
    ovf->n = overfit;
    esmt_batch_source os = {sizeof os, ovf, overfit_next, NULL, NULL, NULL, NULL};
    src = os;
  }

  esmt_trainer_config_options tco;
  if ((st = esmt_trainer_options_from_config(rd, base, model, mc.optimizer, steps, eval_every,
                                             fast_dev > 0, fn, &tco)))
    goto fail;
  const esmt_trainer_options to = tco.to;
  if ((st = esmt_trainer_create(model, &to, &src, &t))) goto fail;
  if (dp) {
    st = esmt_trainer_set_dp(t, dp); /* the trainer owns it now */
    dp = NULL;
    if (st) goto fail;
  }
  if (valid) {
    esmt_batch_source vs;
    esmt_loader_as_source(valid, &vs);
    if ((st = esmt_trainer_set_eval_source(t, &vs))) goto fail;
  }
  t->owned_model = model;
  t->owned_train = train;
  t->owned_valid = valid;
  t->overfit = ovf;
  *out = t;
  return ESMT_OK;
fail:
  esmt_dp_destroy(dp);
  esmt_trainer_destroy(t);
  esmt_loader_destroy(valid);
  esmt_loader_destroy(train);
  esmt_model_destroy(model);
  free(ovf);
  return st;
}
