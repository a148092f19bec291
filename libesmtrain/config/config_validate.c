/* Cross-field checks of a configuration: each key is already valid on its
 * own (types, bounds, choices); these are the combinations that cannot
 * train. Messages name the keys involved and their values. */
#include <stdio.h>
#include <string.h>

#include "config_internal.h"

static int64_t geti(const esmt_config *c, const char *k) {
  int64_t v = 0;
  esmt_config_get_int(c, k, &v);
  return v;
}

static double getd(const esmt_config *c, const char *k) {
  double v = 0;
  esmt_config_get_double(c, k, &v);
  return v;
}

static const char *gets(const esmt_config *c, const char *k) {
  const char *v = "";
  esmt_config_get_string(c, k, &v);
  return v;
}

static esmt_status check_model(const esmt_config *c) {
  long long d = geti(c, "model.hidden_size"), h = geti(c, "model.num_heads");
  if (d % h != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size (%lld) must be divisible by "
                     "model.num_heads (%lld)", d, h);
  if ((d / h) % 2)
    return esmt_fail(ESMT_ERR_CONFIG, "model.hidden_size / model.num_heads = %lld must be even "
                     "(rotary embeddings rotate pairs of dimensions)", d / h);
  long long len = geti(c, "data.max_len"), pos = geti(c, "model.max_positions");
  if (len > pos)
    return esmt_fail(ESMT_ERR_CONFIG, "data.max_len (%lld) exceeds model.max_positions (%lld)",
                     len, pos);
  return ESMT_OK;
}

static esmt_status check_batches(const esmt_config *c) {
  long long len = geti(c, "data.max_len"), rows = geti(c, "data.micro_batch");
  long long budget = geti(c, "data.tokens_per_batch");
  if (rows == 0 && budget < len)
    return esmt_fail(ESMT_ERR_CONFIG, "data.tokens_per_batch (%lld) must hold at least one row "
                     "of data.max_len (%lld) tokens (or set data.micro_batch)", budget, len);
  /* the most padded tokens one micro-batch can carry */
  long long micro = budget;
  if (rows > 0 && rows * len < micro) micro = rows * len;
  long long update = geti(c, "train.tokens_per_update");
  if (update > 0 && update < micro)
    return esmt_fail(ESMT_ERR_CONFIG, "train.tokens_per_update (%lld) is less than one "
                     "micro-batch (%lld tokens from data.tokens_per_batch/data.micro_batch x "
                     "data.max_len): set 0 for one micro-batch per update, or at least %lld",
                     update, micro, micro);
  return ESMT_OK;
}

static esmt_status check_schedule(const esmt_config *c) {
  long long steps = geti(c, "train.max_steps"), warm = geti(c, "schedule.warmup_steps");
  if (geti(c, "train.fast_dev_run") > 0) return ESMT_OK; /* a smoke run ignores the length */
  const char *kind = gets(c, "schedule.kind");
  if (steps == 0 && strcmp(kind, "constant") != 0)
    return esmt_fail(ESMT_ERR_CONFIG, "schedule.kind %s decays over the run's length: set "
                     "train.max_steps (it is 0, unlimited), or use schedule.kind constant", kind);
  if (steps > 0 && warm >= steps)
    return esmt_fail(ESMT_ERR_CONFIG, "schedule.warmup_steps (%lld) must be below "
                     "train.max_steps (%lld)", warm, steps);
  return ESMT_OK;
}

/* Values each key accepts on its own that leave nothing to learn. */
static esmt_status check_meaningful(const esmt_config *c) {
  if (!(getd(c, "data.mask_prob") > 0))
    return esmt_fail(ESMT_ERR_CONFIG, "data.mask_prob is 0: no residue is selected for the "
                     "masked-LM loss, so training learns nothing (ESM-2 uses 0.15)");
  if (!(getd(c, "optimizer.lr") > 0))
    return esmt_fail(ESMT_ERR_CONFIG, "optimizer.lr is 0: the weights would never change "
                     "(ESM-2 used 4e-4 and lower for the larger models)");
  return ESMT_OK;
}

static esmt_status check_hardware(const esmt_config *c) {
  const char *prec = gets(c, "backend.precision"), *backend = gets(c, "backend.name");
  if (!strcmp(prec, "bf16") && !strcmp(backend, "turing_fp16"))
    return esmt_fail(ESMT_ERR_CONFIG, "backend.precision bf16 needs ampere_bf16 (sm_80+), not "
                     "backend.name turing_fp16");
  if (getd(c, "loss_scale.min") > getd(c, "loss_scale.initial"))
    return esmt_fail(ESMT_ERR_CONFIG, "loss_scale.min (%g) exceeds loss_scale.initial (%g)",
                     getd(c, "loss_scale.min"), getd(c, "loss_scale.initial"));
  /* a bare small number is almost always a forgotten unit ("8" for 8GiB) */
  static const char *const limits[] = {"backend.device_memory_limit", "offload.pinned_memory_limit"};
  for (int i = 0; i < 2; i++) {
    long long b = geti(c, limits[i]);
    if (b > 0 && b < (1ll << 20))
      return esmt_fail(ESMT_ERR_CONFIG, "%s is %lld bytes, below 1 MiB: write the unit "
                       "(e.g. %lldGiB)", limits[i], b, b);
  }
  return ESMT_OK;
}

esmt_status esmt_config_validate(const esmt_config *c) {
  ESMT_CHECK_ARG(c, "esmt_config_validate", "config is NULL");
  esmt_status st = check_model(c);
  if (!st) st = check_batches(c);
  if (!st) st = check_schedule(c);
  if (!st) st = check_meaningful(c);
  if (!st) st = check_hardware(c);
  return st;
}
