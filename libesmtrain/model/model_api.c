/* SPDX-License-Identifier: MIT */
/* Public model API: lifecycle, tensor access, forward/backward entry
 * points (host-side checks and transfers) and the gradient norm (the
 * optimizer step is in model_optimizer.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "model.h"
#include "offload.h"
#include "optimizer.h"
#include "param_layer.h"

#define MODEL_CONFIG_MIN_SIZE ESMT_MODEL_CONFIG_MIN_SIZE

void esmt_model_drop_carried(esmt_model *m) {
  for (int i = 0; i < m->n_carried; i++) {
    free(m->carried[i].name);
    free(m->carried[i].data);
  }
  free(m->carried);
  m->carried = NULL;
  m->n_carried = 0;
}

/* fp32 split-half rotary tables: angle = p * inv_freq[c], cos/sin in
 * double. inv_freq defaults to 10000^(-2c/hd) rounded to fp32, as the
 * reference computes it; pretrained checkpoints carry their own
 * (fp16-rounded) values, which esmt_model_set_inv_freq installs. */
esmt_status esmt_model_set_inv_freq(esmt_model *m, const float *inv_freq) {
  const int P = m->cfg.max_positions, half = m->hd / 2;
  uint64_t bytes = (uint64_t)P * (uint64_t)half * sizeof(float);
  for (int i = 0; i < half && i < ESMT_MAX_HALF_HEAD; i++)
    m->inv_freq[i] = inv_freq ? inv_freq[i] : (float)(1.0 / pow(10000.0, (2.0 * i) / (double)m->hd));
  float *c = malloc(bytes), *s = malloc(bytes);
  esmt_status st = ESMT_OK;
  if (!c || !s) st = esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "rotary tables: out of memory");
  for (int i = 0; i < half && st == ESMT_OK; i++)
    for (int p = 0; p < P; p++) {
      double ang = (double)p * (double)m->inv_freq[i];
      c[(size_t)p * half + i] = (float)cos(ang);
      s[(size_t)p * half + i] = (float)sin(ang);
    }
  if (st == ESMT_OK && !m->rope_cos) st = esmt_model_dev_alloc(m, bytes, (void **)&m->rope_cos, "rotary cos table");
  if (st == ESMT_OK && !m->rope_sin) st = esmt_model_dev_alloc(m, bytes, (void **)&m->rope_sin, "rotary sin table");
  if (st == ESMT_OK) {
    esmtb_status cs = m->ops->copy_async(m->dev, m->rope_cos, c, bytes, ESMTB_COPY_H2D, m->stream);
    if (!cs) cs = m->ops->copy_async(m->dev, m->rope_sin, s, bytes, ESMTB_COPY_H2D, m->stream);
    if (!cs) cs = m->ops->stream_sync(m->dev, m->stream);
    if (cs) st = esmt_fail_prefix((esmt_status)cs, "rotary tables: ");
  }
  free(c);
  free(s);
  m->have_forward = 0;
  return st;
}

esmt_status esmt_model_create(esmt_context *ctx, const esmt_model_config *cfg, uint64_t seed,
                              esmt_model **out) {
  return esmt_model_create_with(ctx, cfg, seed, NULL, out);
}

esmt_status esmt_model_create_with_memory(esmt_context *ctx, const esmt_model_config *cfg,
                                          uint64_t seed, const esmt_memory_policy *policy,
                                          esmt_model **out) {
  const char *fn = "esmt_model_create_with_memory";
  if (!policy) return esmt_model_create_with(ctx, cfg, seed, NULL, out);
  esmt_status st = esmt_check_struct(fn, "esmt_memory_policy", policy->struct_size,
                                     sizeof(esmt_memory_policy));
  if (st) return st;
  if ((unsigned)policy->offload_optimizer > 1 || (unsigned)policy->recompute > 1 ||
      policy->stream < ESMT_STREAM_NONE || policy->stream > ESMT_STREAM_WEIGHTS)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: offload_optimizer and recompute must be 0 or "
                     "1, stream an esmt_stream_level", fn);
  if (policy->stream && !policy->offload_optimizer)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: streaming from host memory needs "
                     "offload_optimizer 1 (it streams the offloaded state)", fn);
  const esmt_offload_options o = {.enabled = policy->offload_optimizer,
                                  .pinned_limit = policy->pinned_limit,
                                  .recompute = policy->recompute,
                                  .device_memory_limit = policy->device_memory_limit,
                                  .streamed = policy->stream};
  return esmt_model_create_with(ctx, cfg, seed, &o, out);
}

esmt_status esmt_model_create_with(esmt_context *ctx, const esmt_model_config *cfg, uint64_t seed,
                                   const esmt_offload_options *offload, esmt_model **out) {
  const char *fn = "esmt_model_create";
  ESMT_CHECK_ARG(out, fn, "out is NULL");
  *out = NULL;
  ESMT_CHECK_ARG(ctx && cfg, fn, "ctx and cfg must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_model_config", cfg->struct_size,
                                     MODEL_CONFIG_MIN_SIZE);
  if (st) return st;
  if ((st = esmt_model_config_validate(cfg))) return esmt_fail_prefix(st, "%s: ", fn);
  esmt_model *m = calloc(1, sizeof *m);
  if (!m) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  m->ctx = ctx;
  m->ops = ctx->backend->ops;
  m->cfg.precision = ESMT_PRECISION_AUTO;
  memcpy(&m->cfg, cfg, cfg->struct_size < sizeof m->cfg ? cfg->struct_size : sizeof m->cfg);
  m->cfg.struct_size = sizeof m->cfg;
  if (!esmt_optimizer_name(m->cfg.optimizer)) {
    st = esmt_fail(ESMT_ERR_CONFIG, "%s: optimizer kind %d is not one this library knows "
                   "(ESMT_OPTIMIZER_ADAMW, ESMT_OPTIMIZER_LION)", fn, (int)m->cfg.optimizer);
    free(m);
    return st;
  }
  if ((st = esmt_resolve_precision(m->ops, (int)m->cfg.precision, &m->dtype))) {
    free(m);
    return esmt_fail_prefix(st, "%s: ", fn);
  }
  m->esize = esmt_dtype_size(m->dtype);
  m->cfg.precision = m->dtype == ESMTB_F16    ? ESMT_PRECISION_FP16
                   : m->dtype == ESMTB_BF16 ? ESMT_PRECISION_BF16 : ESMT_PRECISION_FP32;
  if (!m->cfg.ffn_size) m->cfg.ffn_size = 4 * cfg->hidden_size;
  m->L = cfg->num_layers;
  m->d = cfg->hidden_size;
  m->H = cfg->num_heads;
  m->hd = m->d / m->H;
  m->F = m->cfg.ffn_size;
  m->V = cfg->vocab_size;
  esmt_profile_init(m);

  /* Memory policy: recompute and the device budget (the options' limit
   * overrides the context's). */
  m->recompute = offload ? offload->recompute : 0;
  const uint64_t limit = offload && offload->device_memory_limit ? offload->device_memory_limit
                                                                 : ctx->device_memory_limit;
  esmtb_open_options oo = {sizeof oo, esmt_context_device_index(ctx), ctx->num_threads, limit};
  esmtb_status bs = m->ops->open ? m->ops->open(&oo, &m->dev) : ESMT_ERR_UNSUPPORTED;
  if (bs) {
    st = esmt_fail_prefix((esmt_status)bs, "%s: opening backend %s: ", fn, m->ops->name);
    esmt_model_destroy(m);
    return st;
  }
  st = esmt_layout_build(&m->cfg, &m->layout);
  if (!st) st = esmt_model_setup_training(m); /* what trains: model_freeze.c */
  if (!st) st = esmt_model_dev_alloc(m, 256, (void **)&m->scalar, "scratch");
  /* the parameter memory: on the device, or offloaded (memory/param_layer.h) */
  if (!st) {
    const esmt_param_env env = {ctx, m->ops, m->dev, m->stream, m->layout.total, m->dtype,
                                m->esize, m->cfg.optimizer, m->scalar, m->layout.norm_offs,
                                m->layout.n_norm, m->d, m->layout.part_bounds,
                                m->layout.n_parts, esmt_model_device_oom, m, m->train_lo};
    st = esmt_param_memory_setup(&m->mem, &env, offload);
  }
  if (!st && m->hd / 2 > ESMT_MAX_HALF_HEAD)
    st = esmt_fail(ESMT_ERR_CONFIG, "%s: head dim %d is above %d", fn, m->hd, 2 * ESMT_MAX_HALF_HEAD);
  if (!st) st = esmt_model_set_inv_freq(m, NULL);
  if (!st) st = esmt_model_init_params(m, seed);
  m->seed = seed;
  /* (a sharded master's half copy was written with it) */
  if (!st && !esmt_param_master_sharded(&m->mem)) st = esmt_model_sync_lowp(m, 0, m->layout.total);
  if (st) {
    esmt_model_destroy(m);
    return st;
  }
  esmt_logger_log(&ctx->logger, ESMT_LOG_INFO,
                  "model: %d layers, d=%d, %d heads, FFN %d: %llu parameters on %s (%s%s)", m->L,
                  m->d, m->H, m->F, (unsigned long long)m->layout.total, m->ops->name,
                  esmt_dtype_name(m->dtype), m->recompute ? ", activation recompute" : "");
  *out = m;
  return ESMT_OK;
}

void esmt_model_destroy(esmt_model *m) {
  if (!m) return;
  esmt_profile_report(m);
  if (m->dev) {
    if (m->stream || m->ops->stream_sync) m->ops->stream_sync(m->dev, m->stream);
    if (m->mem.layer) m->mem.layer->release(&m->mem);
    void *bufs[] = {m->scalar, m->rope_cos, m->rope_sin, m->arena};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
      if (bufs[i]) m->ops->free(m->dev, ESMTB_MEM_DEVICE, bufs[i]);
    esmt_packed_free(m);
    esmt_head_free(m);
    esmt_lora_free(m);
    m->ops->close(m->dev);
  } else if (m->mem.layer) {
    m->mem.env.dev = NULL; /* host buffers only: there is no device */
    m->mem.layer->release(&m->mem);
  }
  esmt_model_drop_carried(m);
  esmt_model_set_label_names(m, NULL, 0);
  esmt_layout_free(&m->layout);
  free(m->opt_tensors);
  free(m->act_vtables);
  free(m->act_ftables);
  free(m->host_seq_len);
  free(m);
}

esmt_status esmt_model_get_config(const esmt_model *m, esmt_model_config *cfg) {
  const char *fn = "esmt_model_get_config";
  ESMT_CHECK_ARG(m && cfg, fn, "model and cfg must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_model_config", cfg->struct_size,
                                     MODEL_CONFIG_MIN_SIZE);
  if (st) return st;
  uint32_t size = cfg->struct_size;
  memcpy(cfg, &m->cfg, size < sizeof *cfg ? size : sizeof *cfg);
  cfg->struct_size = size;
  return ESMT_OK;
}

esmt_status esmt_model_param_count(const esmt_model *m, uint64_t *count) {
  ESMT_CHECK_ARG(m && count, "esmt_model_param_count", "model and count must not be NULL");
  *count = m->layout.total;
  return ESMT_OK;
}

esmt_status esmt_model_gemm_ceiling(esmt_model *m, int64_t tokens, int repeats,
                                    double *gflops) {
  ESMT_CHECK_ARG(m && gflops, "esmt_model_gemm_ceiling", "model and gflops must not be NULL");
  /* 8192 rows load the largest GPUs; fewer than 256 measure launch overhead */
  const int64_t rows = tokens < 256 ? 256 : tokens > 8192 ? 8192 : tokens;
  const int ffn = m->cfg.ffn_size ? m->cfg.ffn_size : 4 * m->cfg.hidden_size;
  return esmt_context_gemm_ceiling_precision(m->ctx, m->cfg.precision, (int)rows, ffn,
                                             m->cfg.hidden_size, repeats, gflops);
}

esmt_status esmt_model_tensor_count(const esmt_model *m, int *count) {
  ESMT_CHECK_ARG(m && count, "esmt_model_tensor_count", "model and count must not be NULL");
  *count = m->layout.count;
  return ESMT_OK;
}

esmt_status esmt_model_tensor_info(const esmt_model *m, int index, esmt_tensor_info *info) {
  const char *fn = "esmt_model_tensor_info";
  ESMT_CHECK_ARG(m && info, fn, "model and info must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_tensor_info", info->struct_size, sizeof *info);
  if (st) return st;
  if (index < 0 || index >= m->layout.count)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: index %d out of range [0, %d)", fn, index,
                     m->layout.count);
  uint32_t size = info->struct_size;
  *info = m->layout.tensors[index];
  info->struct_size = size;
  return ESMT_OK;
}

esmt_status esmt_model_find_tensor(const esmt_model *m, const char *name, int *index) {
  const char *fn = "esmt_model_find_tensor";
  ESMT_CHECK_ARG(m && name && index, fn, "model, name and index must not be NULL");
  if (strcmp(name, "lm_head.decoder.weight") == 0) name = "esm.embeddings.word_embeddings.weight";
  for (int i = 0; i < m->layout.count; i++)
    if (strcmp(m->layout.tensors[i].name, name) == 0) {
      *index = i;
      return ESMT_OK;
    }
  return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: the model has no tensor named '%s'", fn, name);
}

static float *buffer_of(esmt_model *m, esmt_buffer which) {
  switch (which) {
    case ESMT_BUF_PARAMS: return m->mem.master;
    case ESMT_BUF_GRADS: return m->mem.grads;
    case ESMT_BUF_ADAM_M: return m->mem.moment1;
    case ESMT_BUF_ADAM_V: return m->mem.moment2;
    default: return NULL;
  }
}

static esmt_status tensor_copy(esmt_model *m, const char *name, esmt_buffer which, void *host,
                               uint64_t count, int to_device, const char *fn) {
  ESMT_CHECK_ARG(m && name && host, fn, "model, name and data must not be NULL");
  int idx;
  esmt_status st = esmt_model_find_tensor(m, name, &idx);
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  if (which == ESMT_BUF_ADAM_V && !m->mem.moment2)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: this model's optimizer (%s) keeps no second "
                     "moment (ESMT_BUF_ADAM_V is AdamW's)", fn, esmt_optimizer_name(m->cfg.optimizer));
  float *buf = buffer_of(m, which);
  if (!buf) return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: unknown buffer %d", fn, (int)which);
  const esmt_tensor_info *t = &m->layout.tensors[idx];
  if (count != t->numel)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: '%s' has %llu values, not %llu", fn, name,
                     (unsigned long long)t->numel, (unsigned long long)count);
  uint64_t at = t->offset;
  if (which == ESMT_BUF_ADAM_M || which == ESMT_BUF_ADAM_V) { /* maybe a ZeRO-1 shard */
    if (t->offset < m->mem.opt_lo || t->offset + t->numel > m->mem.opt_hi)
      return esmt_fail(ESMT_ERR_STATE, "%s: the optimizer state of '%s' is held by another "
                       "rank (ZeRO-1 shard [%llu, %llu))", fn, name,
                       (unsigned long long)m->mem.opt_lo, (unsigned long long)m->mem.opt_hi);
    at -= m->mem.opt_lo;
  }
  if (which == ESMT_BUF_GRADS && t->offset < m->mem.env.opt_lo) { /* frozen: no gradient held */
    if (to_device)
      return esmt_fail(ESMT_ERR_STATE, "%s: '%s' is frozen and has no gradient", fn, name);
    memset(host, 0, count * sizeof(float));
    return ESMT_OK;
  }
  if (which == ESMT_BUF_PARAMS && m->mem.frozen_host) { /* a frozen master on the host */
    if (to_device) m->have_forward = 0;
    st = to_device ? esmt_param_write_host(&m->mem, host, t->offset, t->numel)
                   : esmt_param_read_host(&m->mem, host, t->offset, t->numel);
    return st ? esmt_fail_prefix(st, "%s: '%s': ", fn, name) : ESMT_OK;
  }
  if (which == ESMT_BUF_PARAMS && to_device && m->mem.wgather)
    return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: '%s': the weights are sharded over the ranks "
                     "(ZeRO-3) and gathered per layer; write them before the group starts or "
                     "load a checkpoint", fn, name);
  if (which == ESMT_BUF_PARAMS) { /* maybe ZeRO-2's sharded master */
    if (t->offset < m->mem.master_lo || t->offset + t->numel > m->mem.master_hi)
      return esmt_fail(ESMT_ERR_STATE, "%s: the fp32 weights of '%s' are held by another rank "
                       "(ZeRO-2 master shard [%llu, %llu))", fn, name,
                       (unsigned long long)m->mem.master_lo, (unsigned long long)m->mem.master_hi);
    at -= m->mem.master_lo;
  }
  if (which == ESMT_BUF_GRADS) { /* maybe a ZeRO-2 shard */
    if (t->offset < m->mem.grads_lo || t->offset + t->numel > m->mem.grads_hi)
      return esmt_fail(ESMT_ERR_STATE, "%s: the gradients of '%s' are held by another rank "
                       "(ZeRO-2 shard [%llu, %llu))", fn, name,
                       (unsigned long long)m->mem.grads_lo, (unsigned long long)m->mem.grads_hi);
    at -= m->mem.grads_lo;
  }
  if ((st = esmt_master_copy(m, host, buf + at, count * sizeof(float), to_device)))
    return esmt_fail_prefix(st, "%s: '%s': ", fn, name);
  if (to_device && which == ESMT_BUF_GRADS) m->mem.layer->grads_changed(&m->mem);
  if (to_device && which == ESMT_BUF_PARAMS) {
    m->have_forward = 0;
    if ((st = esmt_model_sync_lowp(m, t->offset, t->numel))) return esmt_fail_prefix(st, "%s: ", fn);
  }
  return ESMT_OK;
}

static esmt_status read_tensor_unguarded(esmt_model *m, const char *name, esmt_buffer which, float *dst,
                                   uint64_t count) {
  return tensor_copy(m, name, which, dst, count, 0, "esmt_model_read_tensor");
}

esmt_status esmt_model_read_tensor(esmt_model *model, const char *name, esmt_buffer which, float *dst,
                                   uint64_t count) {
  if (!model) return read_tensor_unguarded(model, name, which, dst, count); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_read_tensor");
  if (st) return st;
  st = read_tensor_unguarded(model, name, which, dst, count);
  esmt_model_leave(model);
  return st;
}

static esmt_status write_tensor_unguarded(esmt_model *m, const char *name, esmt_buffer which,
                                    const float *src, uint64_t count) {
  return tensor_copy(m, name, which, (void *)src, count, 1, "esmt_model_write_tensor");
}

esmt_status esmt_model_write_tensor(esmt_model *model, const char *name, esmt_buffer which,
                                    const float *src, uint64_t count) {
  if (!model) return write_tensor_unguarded(model, name, which, src, count); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_write_tensor");
  if (st) return st;
  st = write_tensor_unguarded(model, name, which, src, count);
  esmt_model_leave(model);
  return st;
}

/* Check a batch on the host: ids, right padding, labels; fill seq_len. */
static esmt_status check_batch(esmt_model *m, const esmt_batch *b, esmt_forward_result *r) {
  const char *fn = "esmt_model_forward";
  /* a residue head's labels are its classes, else token ids */
  const int n_labels = m->cfg.head == ESMT_HEAD_RESIDUE_CLASS ? m->cfg.num_labels : m->V;
  uint64_t selected = 0, real = 0;
  for (int i = 0; i < b->batch; i++) {
    const int32_t *tok = b->tokens + (size_t)i * b->seq_len;
    const int32_t *lab = b->labels ? b->labels + (size_t)i * b->seq_len : NULL;
    int len = 0;
    for (int t = 0; t < b->seq_len; t++) {
      if (tok[t] < 0 || tok[t] >= m->V)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d position %d: token id %d is not "
                         "in [0, %d)", fn, i, t, tok[t], m->V);
      if (tok[t] == ESMT_TOKEN_PAD) continue;
      if (len != t)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d: token at position %d follows "
                         "padding (rows must be right-padded)", fn, i, t);
      len++;
    }
    if (len == 0)
      return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d is all padding", fn, i);
    for (int t = 0; lab && t < b->seq_len; t++) {
      if (lab[t] == ESMT_LABEL_IGNORE) continue;
      if (lab[t] < 0 || lab[t] >= n_labels)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d position %d: label %d is neither "
                         "%d nor in [0, %d)", fn, i, t, lab[t], ESMT_LABEL_IGNORE, n_labels);
      if (t >= len)
        return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: row %d position %d: a padding position "
                         "has a label", fn, i, t);
      selected++;
    }
    m->host_seq_len[i] = len;
    real += (uint64_t)len;
  }
  r->selected = selected;
  r->real_tokens = real;
  return ESMT_OK;
}

static esmt_status upload(esmt_model *m, void *dst, const void *src, uint64_t bytes) {
  esmtb_status cs = m->ops->copy_async(m->dev, dst, src, bytes, ESMTB_COPY_H2D, m->stream);
  return cs ? esmt_fail_prefix((esmt_status)cs, "esmt_model_forward: upload: ") : ESMT_OK;
}

esmt_status esmt_model_stage_batch(esmt_model *m, const esmt_batch *b, int mode,
                                   esmt_forward_result *r, const char *fn) {
  esmt_status st;
  if (b->batch < 1 || b->seq_len < 1 || b->seq_len > m->cfg.max_positions)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: batch %d x %d: need batch >= 1 and "
                     "1 <= seq_len <= max_positions (%d)", fn, b->batch, b->seq_len,
                     m->cfg.max_positions);
  m->have_forward = 0;
  if ((st = esmt_model_reserve_mode(m, b->batch, b->seq_len, mode)))
    return esmt_fail_prefix(st, "%s: ", fn);
  m->packed.nseg = 0;
  if (b->num_segments < 0)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: num_segments %d is negative", fn,
                     b->num_segments);
  if ((st = b->num_segments > 0 ? esmt_packed_prepare(m, b, r) : check_batch(m, b, r))) return st;
  m->B = b->batch;
  m->T = b->seq_len;
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T;
  if ((st = upload(m, m->act.tokens, b->tokens, N * sizeof(int32_t)))) return st;
  return upload(m, m->act.seq_len, m->host_seq_len, (uint64_t)m->B * sizeof(int32_t));
}

/* A task head's loss and outputs (model_head.c) into the caller's result. */
static esmt_status head_result(esmt_model *m, esmt_forward_result *r, float *outputs,
                               esmt_forward_result *result) {
  esmt_status st = esmt_head_download(m, outputs, &r->loss_sum);
  if (st) return st;
  r->loss = r->selected ? r->loss_sum / m->normalizer : 0.0;
  if (result) {
    uint32_t size = result->struct_size;
    *result = *r;
    result->struct_size = size;
  }
  m->have_forward = 1;
  return ESMT_OK;
}

static esmt_status forward_unguarded(esmt_model *m, const esmt_batch *b, esmt_forward_result *result,
                               float *logits) {
  const char *fn = "esmt_model_forward";
  ESMT_CHECK_ARG(m && b, fn, "model and batch must not be NULL");
  esmt_status st = esmt_check_struct(fn, "esmt_batch", b->struct_size,
                                     offsetof(esmt_batch, num_segments));
  if (st) return st;
  /* a caller from before packed rows: its struct ends at loss_normalizer */
  esmt_batch bb = ESMT_BATCH_INIT;
  memcpy(&bb, b, b->struct_size < sizeof bb ? b->struct_size : sizeof bb);
  b = &bb;
  if (result && (st = esmt_check_struct(fn, "esmt_forward_result", result->struct_size,
                                        sizeof *result)))
    return st;
  ESMT_CHECK_ARG(b->tokens, fn, "batch->tokens is NULL");
  if (!(b->loss_normalizer >= 0.0) || !isfinite(b->loss_normalizer))
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: loss_normalizer %g must be >= 0", fn,
                     b->loss_normalizer);
  esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
  if ((st = esmt_model_stage_batch(m, b, m->recompute, &r, fn))) return st;
  m->selected = r.selected;
  m->normalizer = b->loss_normalizer > 0 ? b->loss_normalizer : (double)r.selected;
  const uint64_t N = (uint64_t)m->B * (uint64_t)m->T;
  if (b->labels) {
    if ((st = upload(m, m->act.labels, b->labels, N * sizeof(int32_t)))) return st;
  } else {
    /* No labels: every position ignored (0xFF.. bytes would be -1; use a fill). */
    int32_t *ign = malloc(N * sizeof *ign);
    if (!ign) return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (uint64_t i = 0; i < N; i++) ign[i] = ESMT_LABEL_IGNORE;
    st = upload(m, m->act.labels, ign, N * sizeof(int32_t));
    if (!st) {
      esmtb_status ss = m->ops->stream_sync(m->dev, m->stream);
      if (ss) st = esmt_fail_prefix((esmt_status)ss, "%s: ", fn);
    }
    free(ign);
    if (st) return st;
  }
  if (m->cfg.head != ESMT_HEAD_NONE && (st = esmt_head_stage(m, b, &r, fn))) return st;
  esmt_lora_begin_pass(m, !m->eval_mode);
  if ((st = esmt_model_run_forward(m))) return st;
  if (m->cfg.head != ESMT_HEAD_NONE) return head_result(m, &r, logits, result);
  float loss_sum = 0.0f;
  const uint64_t NV = N * (uint64_t)m->V;
  /* Half logits come down into a host staging copy, widened below. */
  void *half = NULL;
  if (logits && m->dtype != ESMTB_F32 && !(half = malloc(NV * m->esize)))
    return esmt_fail(ESMT_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu logits", fn,
                     (unsigned long long)NV);
  esmtb_status cs = m->ops->copy_async(m->dev, &loss_sum, m->act.loss_sum, sizeof loss_sum,
                                       ESMTB_COPY_D2H, m->stream);
  if (!cs && logits)
    cs = m->ops->copy_async(m->dev, half ? half : (void *)logits, m->act.logits, NV * m->esize,
                            ESMTB_COPY_D2H, m->stream);
  if (!cs) cs = m->ops->stream_sync(m->dev, m->stream);
  if (!cs && half) esmt_to_f32(m->dtype, half, logits, NV);
  free(half);
  if (cs) return esmt_fail_prefix((esmt_status)cs, "%s: download: ", fn);
  if (logits && b->num_segments > 0) esmt_packed_zero_padding(m, b, logits);
  else if (logits) /* padded positions carry no prediction */
    for (int i = 0; i < m->B; i++)
      for (int t = m->host_seq_len[i]; t < m->T; t++)
        memset(logits + ((uint64_t)i * m->T + t) * m->V, 0, (size_t)m->V * sizeof(float));
  r.loss_sum = loss_sum;
  r.loss = r.selected ? loss_sum / m->normalizer : 0.0;
  if (result) {
    uint32_t size = result->struct_size;
    *result = r;
    result->struct_size = size;
  }
  m->have_forward = 1;
  return ESMT_OK;
}

esmt_status esmt_model_forward(esmt_model *model, const esmt_batch *batch, esmt_forward_result *result,
                               float *logits) {
  if (!model) return forward_unguarded(model, batch, result, logits); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_forward");
  if (st) return st;
  st = forward_unguarded(model, batch, result, logits);
  esmt_model_leave(model);
  return st;
}

static esmt_status backward_unguarded(esmt_model *m) {
  const char *fn = "esmt_model_backward";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  if (!m->have_forward)
    return esmt_fail(ESMT_ERR_STATE, "%s: no forward pass to differentiate (call "
                     "esmt_model_forward first; weights written since invalidate it)", fn);
  m->mem.layer->grads_changed(&m->mem); /* the offload's host copy, unless streaming */
  esmt_status st = esmt_model_run_backward(m);
  if (st) return st;
  m->have_forward = 0; /* activations are consumed */
  return ESMT_OK;
}

esmt_status esmt_model_backward(esmt_model *model) {
  if (!model) return backward_unguarded(model); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_backward");
  if (st) return st;
  st = backward_unguarded(model);
  esmt_model_leave(model);
  return st;
}

static esmt_status zero_grad_unguarded(esmt_model *m) {
  ESMT_CHECK_ARG(m, "esmt_model_zero_grad", "model is NULL");
  esmt_status st = m->mem.layer->zero_grads(&m->mem);
  return st ? esmt_fail_prefix(st, "esmt_model_zero_grad: ") : ESMT_OK;
}

esmt_status esmt_model_zero_grad(esmt_model *model) {
  if (!model) return zero_grad_unguarded(model); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_zero_grad");
  if (st) return st;
  st = zero_grad_unguarded(model);
  esmt_model_leave(model);
  return st;
}

esmt_status esmt_model_set_recompute(esmt_model *m, int enabled) {
  const char *fn = "esmt_model_set_recompute";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  if (enabled != 0 && enabled != 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: enabled is %d; use 0 or 1", fn, enabled);
  m->recompute = enabled; /* esmt_model_reserve re-carves; backward follows the carving */
  return ESMT_OK;
}

esmt_status esmt_model_get_recompute(const esmt_model *m, int *enabled) {
  ESMT_CHECK_ARG(m && enabled, "esmt_model_get_recompute", "model and enabled must not be NULL");
  *enabled = m->recompute;
  return ESMT_OK;
}

esmt_status esmt_model_set_deterministic(esmt_model *m, int deterministic) {
  const char *fn = "esmt_model_set_deterministic";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  if (deterministic != 0 && deterministic != 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: deterministic is %d; use 0 or 1", fn,
                     deterministic);
  m->nondeterministic = !deterministic;
  return ESMT_OK;
}

esmt_status esmt_model_set_training(esmt_model *m, int training) {
  const char *fn = "esmt_model_set_training";
  ESMT_CHECK_ARG(m, fn, "model is NULL");
  if (training != 0 && training != 1)
    return esmt_fail(ESMT_ERR_INVALID_ARGUMENT, "%s: training is %d; use 0 or 1", fn, training);
  m->eval_mode = !training;
  return ESMT_OK;
}

esmt_status esmt_model_get_deterministic(const esmt_model *m, int *deterministic) {
  ESMT_CHECK_ARG(m && deterministic, "esmt_model_get_deterministic",
                 "model and deterministic must not be NULL");
  *deterministic = !m->nondeterministic;
  return ESMT_OK;
}

static esmt_status grad_norm_unguarded(esmt_model *m, double *norm) {
  const char *fn = "esmt_model_grad_norm";
  ESMT_CHECK_ARG(m && norm, fn, "model and norm must not be NULL");
  float sum = 0.0f;
  esmt_status st = m->mem.layer->grad_sumsq(&m->mem, &sum); /* the offload: on its host copy */
  if (st) return esmt_fail_prefix(st, "%s: ", fn);
  *norm = sqrt((double)sum);
  return ESMT_OK;
}

esmt_status esmt_model_grad_norm(esmt_model *model, double *norm) {
  if (!model) return grad_norm_unguarded(model, norm); /* its message */
  esmt_status st = esmt_model_enter(model, "esmt_model_grad_norm");
  if (st) return st;
  st = grad_norm_unguarded(model, norm);
  esmt_model_leave(model);
  return st;
}
