/* SPDX-License-Identifier: MIT */
/* esmt_plan_attention_maps: the inference buffers of attention maps, from
 * the model's own sizing (attention_maps.h), so plan and allocation agree. */
#include "attention_maps.h"

esmt_status esmt_plan_attention_maps(const esmt_model_config *config, int batch, int seq_len,
                                     uint64_t *device_bytes, uint64_t *host_bytes) {
  ESMT_CHECK_ARG(config && device_bytes && host_bytes && batch >= 0 && seq_len >= 0,
                 "esmt_plan_attention_maps", "config and outputs must not be NULL, sizes >= 0");
  const uint64_t one = esmt_attention_maps_buffer_bytes(batch, config->num_heads, seq_len);
  *device_bytes = one;
  *host_bytes = one + (uint64_t)config->num_layers * one;
  return ESMT_OK;
}
