/* SPDX-License-Identifier: MIT */
/* From a configuration to the memory planner's request: the one place
 * that maps the config's model, batch, precision and offload keys onto
 * esmt_plan_request (see esmtrain.h), for the trainer and the CLI alike. */
#include <stddef.h>
#include <string.h>

#include "esmtrain/backend.h"
#include "context.h"
#include "model.h"
#include "config_read.h"
#include "optimizer.h"

static int policy(esmt_config_reader *rd, const char *key) { /* -1 auto, 0 off, 1 on */
  const char *v = esmt_cfg_string(rd, key);
  return !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1;
}

int esmt_config_stream_level(const char *v) {
  return !strcmp(v, "off")         ? ESMT_STREAM_NONE
       : !strcmp(v, "gradients")   ? ESMT_STREAM_GRADIENTS
       : !strcmp(v, "weights")     ? ESMT_STREAM_WEIGHTS : -1;
}

esmt_status esmt_config_plan_request(const esmt_config *cfg, const esmt_context *ctx,
                                     esmt_model_config *model, esmt_plan_request *r) {
  const char *fn = "esmt_config_plan_request";
  ESMT_CHECK_ARG(cfg && r && model, fn, "config, model and request must not be NULL");
  /* a caller's request may end before `stream` (filled up to its size) */
  esmt_status st = esmt_check_struct(fn, "esmt_plan_request", r->struct_size,
                                     offsetof(esmt_plan_request, stream));
  if (st) return st;
  if ((st = esmt_check_struct(fn, "esmt_model_config", model->struct_size, sizeof *model)))
    return st;
  esmt_config_reader reader, *c = &reader; /* a mistyped key fails loudly */
  esmt_cfg_reader_init(c, cfg);
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request pr = ESMT_PLAN_REQUEST_INIT;
  pr.model = model;
  esmt_cfg_model_shape(c, &mc);
  mc.precision = ESMT_PRECISION_FP32;
  /* the loader's greedy batches hold up to tokens_per_batch tokens in any
   * shape, and the activation arena depends on the token count only */
  pr.seq_len = (int)esmt_cfg_int(c, "data.max_len");
  pr.micro_batch = (int)esmt_cfg_int(c, "data.micro_batch");
  if (!pr.micro_batch && pr.seq_len > 0)
    pr.micro_batch = (int)((esmt_cfg_int(c, "data.tokens_per_batch") + pr.seq_len - 1) / pr.seq_len);
  if (pr.micro_batch < 1) pr.micro_batch = 1;

  const char *p = esmt_cfg_string(c, "backend.precision");
  const uint64_t budget = esmt_cfg_bytes(c, "backend.device_memory_limit");
  const char *opt_kind = esmt_cfg_string(c, "optimizer.kind");
  const int64_t zero = esmt_cfg_int(c, "dist.zero");
  pr.offload_optimizer = policy(c, "offload.optimizer");
  pr.recompute = policy(c, "offload.recompute");
  pr.stream = esmt_config_stream_level(esmt_cfg_string(c, "offload.stream"));
  pr.tokens_per_update = (uint64_t)esmt_cfg_int(c, "train.tokens_per_update");
  if ((st = esmt_cfg_status(c, fn))) return st;
  const int asked = !strcmp(p, "fp32") ? ESMT_PRECISION_FP32 : !strcmp(p, "fp16") ? ESMT_PRECISION_FP16
                  : !strcmp(p, "bf16") ? ESMT_PRECISION_BF16 : ESMT_PRECISION_AUTO;
  int device_backend = 1; /* unknown backend: a half precision means a GPU */
  if (ctx && ctx->backend) {
    esmtb_dtype dt = ESMTB_F32;
    if ((st = esmt_resolve_precision(ctx->backend->ops, asked, &dt))) return st;
    pr.precision = dt == ESMTB_F16 ? ESMT_PRECISION_FP16 : dt == ESMTB_BF16 ? ESMT_PRECISION_BF16
                                                                       : ESMT_PRECISION_FP32;
    device_backend = !(ctx->backend->ops->caps & ESMTB_CAP_HOST_ADDRESSABLE);
  } else {
    pr.precision = asked == ESMT_PRECISION_AUTO ? ESMT_PRECISION_FP32 : (esmt_precision)asked;
  }
  if (pr.precision != ESMT_PRECISION_FP32 && device_backend)
    pr.runtime_overhead = 512ull << 20; /* a CUDA context, typically */

  pr.device_budget = budget;
  if ((st = esmt_optimizer_from_name(opt_kind, &mc.optimizer))) return st;
  pr.zero = (int)zero; /* the world size is the launcher's: the caller sets it */
  if ((zero > 0 || pr.offload_optimizer == 0) && pr.stream < 0)
    pr.stream = ESMT_STREAM_NONE; /* streaming needs the optimizer on the host, alone */
  *model = mc;
  const uint32_t size = r->struct_size;
  memcpy(r, &pr, size < sizeof pr ? size : sizeof pr);
  r->struct_size = size;
  return ESMT_OK;
}
