/* SPDX-License-Identifier: MIT */
/* Cross-field checks of a configuration: each key is already valid on its
 * own (types, bounds, choices); these are the combinations that cannot
 * train. Messages name the keys involved and their values. */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"
#include "config_read.h"

/* Every check reads its keys first, then stops on a mistyped one. */
#define READS_DONE(rd)                                              \
  do {                                                              \
    esmt_status rs_ = esmt_cfg_status(rd, "esmt_config_validate"); \
    if (rs_) return rs_;                                            \
  } while (0)

static esmt_status check_model(esmt_config_reader *c) {
  long long d = esmt_cfg_int(c, "model.hidden_size"), h = esmt_cfg_int(c, "model.num_heads");
  long long len = esmt_cfg_int(c, "data.max_len"), pos = esmt_cfg_int(c, "model.max_positions");
  READS_DONE(c);
  if (d % h != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size (%lld) must be divisible by "
                     "model.num_heads (%lld)", d, h);
  if ((d / h) % 2)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size / model.num_heads = %lld must be even "
                     "(rotary embeddings rotate pairs of dimensions)", d / h);
  if (len > pos)
    return esmt_fail(ESMT_ERR_CONFIG, "data.max_len (%lld) exceeds model.max_positions (%lld)",
                     len, pos);
  return ESMT_OK;
}

static esmt_status check_batches(esmt_config_reader *c) {
  long long len = esmt_cfg_int(c, "data.max_len"), rows = esmt_cfg_int(c, "data.micro_batch");
  long long budget = esmt_cfg_int(c, "data.tokens_per_batch");
  long long update = esmt_cfg_int(c, "train.tokens_per_update");
  READS_DONE(c);
  if (rows == 0 && budget < len)
    return esmt_fail(ESMT_ERR_CONFIG, "data.tokens_per_batch (%lld) must hold at least one row "
                     "of data.max_len (%lld) tokens (or set data.micro_batch)", budget, len);
  /* the most padded tokens one micro-batch can carry */
  long long micro = budget;
  if (rows > 0 && rows * len < micro) micro = rows * len;
  if (update > 0 && update < micro)
    return esmt_fail(ESMT_ERR_CONFIG, "train.tokens_per_update (%lld) is less than one "
                     "micro-batch (%lld tokens from data.tokens_per_batch/data.micro_batch x "
                     "data.max_len): set 0 for one micro-batch per update, or at least %lld",
                     update, micro, micro);
  return ESMT_OK;
}

static esmt_status check_schedule(esmt_config_reader *c) {
  long long steps = esmt_cfg_int(c, "train.max_steps"), warm = esmt_cfg_int(c, "schedule.warmup_steps");
  const long long fast_dev = esmt_cfg_int(c, "train.fast_dev_run");
  const char *kind = esmt_cfg_string(c, "schedule.kind");
  READS_DONE(c);
  if (fast_dev > 0) return ESMT_OK; /* a smoke run ignores the length */
  if (steps == 0 && strcmp(kind, "constant") != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "schedule.kind %s decays over the run's length: set "
                     "train.max_steps (it is 0, unlimited), or use schedule.kind constant", kind);
  if (steps > 0 && warm >= steps)
    return esmt_fail(ESMT_ERR_CONFIG, "schedule.warmup_steps (%lld) must be below "
                     "train.max_steps (%lld)", warm, steps);
  return ESMT_OK;
}

/* Values each key accepts on its own that leave nothing to learn. */
static esmt_status check_meaningful(esmt_config_reader *c) {
  const double mask_prob = esmt_cfg_double(c, "data.mask_prob"), lr = esmt_cfg_double(c, "optimizer.lr");
  READS_DONE(c);
  if (!(mask_prob > 0))
    return esmt_fail(ESMT_ERR_CONFIG, "data.mask_prob is 0: no residue is selected for the "
                     "masked-LM loss, so training learns nothing (ESM-2 uses 0.15)");
  if (!(lr > 0))
    return esmt_fail(ESMT_ERR_CONFIG, "optimizer.lr is 0: the weights would never change "
                     "(ESM-2 used 4e-4 and lower for the larger models)");
  return ESMT_OK;
}

static esmt_status check_hardware(esmt_config_reader *c) {
  const char *prec = esmt_cfg_string(c, "backend.precision"), *backend = esmt_cfg_string(c, "backend.name");
  const double ls_min = esmt_cfg_double(c, "loss_scale.min"), ls_init = esmt_cfg_double(c, "loss_scale.initial");
  static const char *const limits[] = {"backend.device_memory_limit", "offload.pinned_memory_limit"};
  long long lim[2];
  for (int i = 0; i < 2; i++) lim[i] = (long long)esmt_cfg_bytes(c, limits[i]);
  READS_DONE(c);
  if (!strcmp(prec, "bf16") && !strcmp(backend, "turing_fp16"))
    return esmt_fail(ESMT_ERR_CONFIG, "backend.precision bf16 needs ampere_bf16 (sm_80+), not "
                     "backend.name turing_fp16");
  if (ls_min > ls_init)
    return esmt_fail(ESMT_ERR_CONFIG, "loss_scale.min (%g) exceeds loss_scale.initial (%g)",
                     ls_min, ls_init);
  /* a bare small number is almost always a forgotten unit ("8" for 8GiB) */
  for (int i = 0; i < 2; i++) {
    long long b = lim[i];
    if (b > 0 && b < (1ll << 20))
      return esmt_fail(ESMT_ERR_CONFIG, "%s is %lld bytes, below 1 MiB: write the unit "
                       "(e.g. %lldGiB)", limits[i], b, b);
  }
  return ESMT_OK;
}

/* Streaming from host memory sits on the optimizer's host side, and does
 * not combine with ZeRO (each rank would stream the whole model's layers);
 * ZeRO-1/2 combine with optimizer offload (dist/dp_zero.c). */
static esmt_status check_memory_levels(esmt_config_reader *c) {
  const char *stream = esmt_cfg_string(c, "offload.stream");
  const char *opt = esmt_cfg_string(c, "offload.optimizer");
  const long long zero = esmt_cfg_int(c, "dist.zero");
  READS_DONE(c);
  if (esmt_config_stream_level(stream) <= 0) return ESMT_OK;
  if (!strcmp(opt, "off"))
    return esmt_fail(ESMT_ERR_CONFIG, "offload.stream %s needs the optimizer on the host: set "
                     "offload.optimizer on (or auto), or offload.stream off", stream);
  if (zero)
    return esmt_fail(ESMT_ERR_CONFIG, "offload.stream %s does not combine with dist.zero %lld "
                     "(a rank would stream the whole model's layers): set one of them off; "
                     "dist.zero 1, 2 or 3 combine with offload.optimizer on (each rank's shard "
                     "on its host)", stream, zero);
  return ESMT_OK;
}

esmt_status esmt_config_validate(const esmt_config *cfg) {
  ESMT_CHECK_ARG(cfg, "esmt_config_validate", "config is NULL");
  esmt_config_reader reader, *c = &reader;
  esmt_cfg_reader_init(c, cfg);
  esmt_status st = check_model(c);
  if (!st) st = check_batches(c);
  if (!st) st = check_schedule(c);
  if (!st) st = check_meaningful(c);
  if (!st) st = check_hardware(c);
  if (!st) st = check_memory_levels(c);
  return st;
}
