/* SPDX-License-Identifier: MIT */
/* Context lifecycle and tunables. */
#include "esmtrain/backend.h"
#include "context.h"

#include "dist_env.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Size of esmt_context_options in 0.1: the least a caller may pass. */
#define CONTEXT_OPTIONS_MIN_SIZE (offsetof(esmt_context_options, job_micro_batch) + sizeof(int))

esmt_status esmt_context_options_init(esmt_context_options *opts) {
  ESMT_CHECK_ARG(opts, "esmt_context_options_init", "opts is NULL");
  esmt_context_options init = ESMT_CONTEXT_OPTIONS_INIT;
  *opts = init;
  return ESMT_OK;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

esmt_status esmt_context_create(const esmt_context_options *user_opts, esmt_context **out) {
  ESMT_CHECK_ARG(out, "esmt_context_create", "out is NULL");
  *out = NULL;
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  if (user_opts) {
    esmt_status st = esmt_check_struct("esmt_context_create", "esmt_context_options",
                                       user_opts->struct_size, CONTEXT_OPTIONS_MIN_SIZE);
    if (st) return st;
    memcpy(&opts, user_opts,
           user_opts->struct_size < sizeof opts ? user_opts->struct_size : sizeof opts);
  }
  if (opts.num_threads < 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                     "esmt_context_create: num_threads is %d; use 0 (all cores) or a positive count",
                     opts.num_threads);
  esmt_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "esmt_context_create: out of memory");
  ctx->num_threads = opts.num_threads ? opts.num_threads : online_cores();
  ctx->device_memory_limit = opts.device_memory_limit;
  ctx->logger.fn = opts.log;
  ctx->logger.user = opts.log_user;
  ctx->logger.min_level = opts.log_level;
  ctx->progress = opts.progress;
  ctx->progress_user = opts.progress_user;

  esmtb_job job = {sizeof job, opts.job_param_count, opts.job_seq_len, opts.job_micro_batch};
  /* a forced backend (the API, else ESMTRAIN_BACKEND) loads its plugin
   * alone: the others' libraries (cuBLASLt, NCCL) are never mapped */
  const char *forced = opts.backend && *opts.backend ? opts.backend : getenv("ESMTRAIN_BACKEND");
  esmt_status st = esmt_registry_load(&ctx->registry, opts.backend_path, forced, &job, &ctx->logger);
  if (st == ESMT_OK) st = esmt_registry_choose(&ctx->registry, opts.backend);
  if (st) {
    esmt_fail_prefix(st, "esmt_context_create: ");
    esmt_context_destroy(ctx);
    return st;
  }
  ctx->backend = &ctx->registry.entries[ctx->registry.chosen];
  esmt_logger_log(&ctx->logger, ESMT_LOG_INFO, "backend %s chosen (score %d, %s)",
                  ctx->backend->name, ctx->backend->score, ctx->backend->path);
  *out = ctx;
  return ESMT_OK;
}

void esmt_context_destroy(esmt_context *ctx) {
  if (!ctx) return;
  esmt_registry_release(&ctx->registry);
  free(ctx);
}

static const char *const k_option_names[] = {"num_threads", "log_level", "device_memory_limit"};
#define N_OPTIONS ((int)(sizeof k_option_names / sizeof k_option_names[0]))

static esmt_status unknown_option(const char *fn, const char *name) {
  return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: unknown option '%s' (did you mean '%s'?)", fn,
                   name, esmt_closest(name, k_option_names, N_OPTIONS));
}

static int parse_level(const char *v, esmt_log_level *out) {
  static const char *const names[] = {"debug", "info", "warn", "error", "none"};
  for (int i = 0; i < 5; i++)
    if (strcasecmp(v, names[i]) == 0) { *out = (esmt_log_level)i; return 1; }
  return 0;
}

esmt_status esmt_context_set_option(esmt_context *ctx, const char *name, const char *value) {
  const char *fn = "esmt_context_set_option";
  ESMT_CHECK_ARG(ctx, fn, "ctx is NULL");
  ESMT_CHECK_ARG(name, fn, "name is NULL");
  ESMT_CHECK_ARG(value, fn, "value is NULL");
  if (strcmp(name, "num_threads") == 0) {
    char *end = NULL;
    long v = strtol(value, &end, 10);
    int64_t lo, hi;
    esmt_context_option_bounds(ctx, name, &lo, &hi);
    if (!*value || *end || v < lo || v > hi)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                       "%s: num_threads must be an integer in [%lld, %lld], got '%s'", fn,
                       (long long)lo, (long long)hi, value);
    ctx->num_threads = v ? (int)v : online_cores();
    return ESMT_OK;
  }
  if (strcmp(name, "log_level") == 0) {
    esmt_log_level lv;
    if (!parse_level(value, &lv))
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT,
                       "%s: log_level must be debug, info, warn, error or none, got '%s'", fn,
                       value);
    ctx->logger.min_level = lv;
    return ESMT_OK;
  }
  if (strcmp(name, "device_memory_limit") == 0) { /* models created from now on */
    uint64_t b = 0;
    if (esmt_parse_size(value, &b) != ESMT_OK || b > (uint64_t)INT64_MAX)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: device_memory_limit must be a size such as "
                       "8GiB or 0 (no limit), got '%s'", fn, value);
    ctx->device_memory_limit = b;
    return ESMT_OK;
  }
  return unknown_option(fn, name);
}

esmt_status esmt_context_option_bounds(const esmt_context *ctx, const char *name, int64_t *min,
                                       int64_t *max) {
  const char *fn = "esmt_context_option_bounds";
  ESMT_CHECK_ARG(ctx, fn, "ctx is NULL");
  ESMT_CHECK_ARG(name && min && max, fn, "name, min and max must not be NULL");
  if (strcmp(name, "num_threads") == 0) {
    *min = 0;
    *max = 1024;
    return ESMT_OK;
  }
  if (strcmp(name, "log_level") == 0) {
    *min = ESMT_LOG_DEBUG;
    *max = ESMT_LOG_NONE;
    return ESMT_OK;
  }
  if (strcmp(name, "device_memory_limit") == 0) {
    *min = 0;
    *max = INT64_MAX;
    return ESMT_OK;
  }
  return unknown_option(fn, name);
}

esmt_status esmt_context_backend_count(const esmt_context *ctx, int *count) {
  ESMT_CHECK_ARG(ctx, "esmt_context_backend_count", "ctx is NULL");
  ESMT_CHECK_ARG(count, "esmt_context_backend_count", "count is NULL");
  *count = ctx->registry.count;
  return ESMT_OK;
}

esmt_status esmt_context_backend_info(const esmt_context *ctx, int index,
                                      esmt_backend_info *info) {
  const char *fn = "esmt_context_backend_info";
  ESMT_CHECK_ARG(ctx, fn, "ctx is NULL");
  ESMT_CHECK_ARG(info, fn, "info is NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_backend_info", info->struct_size,
                                     sizeof(esmt_backend_info));
  if (st) return st;
  if (index < 0 || index >= ctx->registry.count)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: index %d out of range [0, %d)", fn, index,
                     ctx->registry.count);
  const esmt_backend_entry *e = &ctx->registry.entries[index];
  uint32_t size = info->struct_size;
  memset(info, 0, sizeof *info);
  info->struct_size = size;
  snprintf(info->name, sizeof info->name, "%s", e->name);
  snprintf(info->path, sizeof info->path, "%s", e->path);
  snprintf(info->description, sizeof info->description, "%s", e->description);
  snprintf(info->reason, sizeof info->reason, "%s", e->reason);
  if (e->loaded && e->probe.available)
    snprintf(info->note, sizeof info->note, "%s", e->probe.reason);
  info->loaded = e->loaded;
  info->available = e->loaded && e->probe.available;
  info->score = e->score;
  info->chosen = (index == ctx->registry.chosen);
  int nd = e->probe.device_count;
  if (nd > ESMT_MAX_DEVICES) nd = ESMT_MAX_DEVICES;
  if (nd < 0) nd = 0;
  info->device_count = nd;
  for (int i = 0; i < nd; i++) {
    esmt_device_info *d = &info->devices[i];
    d->struct_size = sizeof *d;
    snprintf(d->name, sizeof d->name, "%s", e->probe.devices[i].name);
    d->cc_major = e->probe.devices[i].cc_major;
    d->cc_minor = e->probe.devices[i].cc_minor;
    d->total_bytes = e->probe.devices[i].total_bytes;
    d->free_bytes = e->probe.devices[i].free_bytes;
  }
  return ESMT_OK;
}

const char *esmt_context_backend_name(const esmt_context *ctx) {
  if (!ctx || !ctx->backend) return "";
  return ctx->backend->name;
}

int esmt_context_device_index(const esmt_context *ctx) {
  const esmt_backend_entry *b = ctx->backend;
  esmt_dist_env env;
  if (!(b->ops->caps & ESMTB_CAP_MULTI_DEVICE) || b->probe.device_count < 1 ||
      esmt_dist_env_detect(&env) != ESMT_OK)
    return 0;
  return env.local_rank % b->probe.device_count;
}

int esmt_report_progress(const esmt_context *ctx, esmt_progress_fn fn, void *user,
                         esmt_progress *p) {
  if (!fn && ctx) {
    fn = ctx->progress;
    user = ctx->progress_user;
  }
  if (!fn) return 0;
  p->struct_size = sizeof *p;
  return fn(user, p) != 0;
}
