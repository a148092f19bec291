/* Out of device memory is a planned error: the message names what did not
 * fit and says what to change, with the figures the change would give. */
#include "model.h"

#define MIB(x) ((double)(x) / 1048576.0)

esmt_status esmt_oom_advice(const esmt_model *m, esmt_status st, const char *what, uint64_t bytes,
                            int B, int T) {
  if (st != ESMT_ERR_OUT_OF_MEMORY) return st;
  uint64_t avail = 0, total = 0;
  if (m->ops->mem_info && m->dev && m->ops->mem_info(m->dev, &avail, &total) == 0 && total)
    esmt_fail_append(st, " (device: %.1f MiB free of %.1f MiB)", MIB(avail), MIB(total));
  esmt_fail_append(st, ". %s needs %.1f MiB more; to fit:", what, MIB(bytes));
  if (B > 0) {
    esmt_fail_append(st, " use a smaller micro-batch (data.micro_batch or data.tokens_per_batch)"
                     " or shorter rows (data.max_len)");
    if (!m->recompute)
      esmt_fail_append(st, ", turn on activation recompute (offload.recompute: on; "
                       "esmt_model_set_recompute) for %.1f MiB of activations",
                       MIB(esmt_activation_bytes(&m->cfg, B, T, (int)m->esize, 1)));
  }
  if (!m->offload)
    esmt_fail_append(st, "%s offload the optimizer (offload.optimizer: on) to move %.1f MiB of "
                     "fp32 master weights and AdamW moments to the host",
                     B > 0 ? "," : "", MIB(m->layout.total * 12));
  if (m->dtype == ESMTB_F32)
    esmt_fail_append(st, ", use a lower precision (backend.precision)");
  esmt_fail_append(st, ", use a smaller model or raise backend.device_memory_limit; "
                   "`esmtrain-example plan` shows what fits");
  return st;
}
