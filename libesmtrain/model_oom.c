/* Out of device memory is a planned error: after the allocator's message
 * (what did not fit, the limit) say what to change, with the figures the
 * change would give. */
#include <stdio.h>

#include "model.h"

#define MIB(x) ((double)(x) / 1048576.0)

esmt_status esmt_oom_advice(const esmt_model *m, esmt_status st, int B, int T) {
  if (st != ESMT_ERR_OUT_OF_MEMORY) return st;
  char item[6][200];
  int n = 0;
  if (B > 0)
    snprintf(item[n++], sizeof item[0], "use a smaller micro-batch (data.micro_batch or "
             "data.tokens_per_batch) or shorter rows (data.max_len)");
  if (B > 0 && !m->recompute)
    snprintf(item[n++], sizeof item[0], "turn on activation recompute (offload.recompute: on, "
             "or esmt_model_set_recompute) for %.1f MiB of activations",
             MIB(esmt_activation_bytes(&m->cfg, B, T, (int)m->esize, 1)));
  if (!m->offload)
    snprintf(item[n++], sizeof item[0], "offload the optimizer (offload.optimizer: on) to move "
             "%.1f MiB of fp32 master weights and AdamW moments to the host",
             MIB(m->layout.total * 12));
  if (m->dtype == ESMTB_F32)
    snprintf(item[n++], sizeof item[0], "compute in a lower precision (backend.precision)");
  snprintf(item[n++], sizeof item[0], "use a smaller model");
  snprintf(item[n++], sizeof item[0], "raise backend.device_memory_limit");
  uint64_t avail = 0, total = 0;
  if (m->ops->mem_info && m->dev && m->ops->mem_info(m->dev, &avail, &total) == 0 && total)
    esmt_fail_append(st, " (device: %.1f MiB free of %.1f MiB)", MIB(avail), MIB(total));
  esmt_fail_append(st, ". To fit: ");
  for (int i = 0; i < n; i++)
    esmt_fail_append(st, "%s%s", i == 0 ? "" : i == n - 1 ? ", or " : ", ", item[i]);
  esmt_fail_append(st, " (`esmtrain-example plan` shows what fits)");
  return st;
}
