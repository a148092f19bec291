/* SPDX-License-Identifier: MIT */
/* Per-step device figures (device_stats.h). */
#include "ops_table.h"
#include "device_stats.h"

#include <stdio.h>
#include <string.h>

#include "gpu_monitor.h"
#include "registry.h"

#define NVML_PERIOD_S 1.0

static void find_in_nvml(esmt_device_stats *ds, const esmtb_ops *ops, esmtb_device *dev,
                         const esmt_logger *log) {
  ds->nvml = -1;
  if (!esmt_ops_has_pci_bus_id(ops)) {
    if (log) esmt_logger_log(log, ESMT_LOG_DEBUG, "device utilisation: backend %s does not give "
                             "its PCI bus id (ABI < 1.5): memory figures only", ops->name);
    return;
  }
  if (ops->pci_bus_id(dev, ds->bus_id, sizeof ds->bus_id) != 0) {
    if (log) esmt_logger_log(log, ESMT_LOG_DEBUG, "device utilisation: no PCI bus id: %s",
                             esmt_last_error());
    return;
  }
  ds->bus_id[sizeof ds->bus_id - 1] = '\0';
  esmt_gpu_sample s = ESMT_GPU_SAMPLE_INIT;
  if (esmt_gpu_sample_bus_id(ds->bus_id, &s) != ESMT_OK) {
    if (log) esmt_logger_log(log, ESMT_LOG_DEBUG, "device utilisation: %s", esmt_last_error());
    esmt_clear_error();
    return;
  }
  ds->nvml = 1;
}

void esmt_device_stats_fill(esmt_device_stats *ds, const esmtb_ops *ops, esmtb_device *dev,
                            const esmt_logger *log, esmt_train_metrics *mt) {
  mt->device_memory_used_mib = mt->device_memory_total_mib = -1;
  mt->device_util_percent = mt->device_temperature_c = -1;
  if (!ops || !dev || (ops->caps & ESMTB_CAP_HOST_ADDRESSABLE)) return;
  uint64_t free_b = 0, total_b = 0;
  if (ops->mem_info && ops->mem_info(dev, &free_b, &total_b) == 0 && total_b) {
    mt->device_memory_total_mib = (double)total_b / (1024.0 * 1024.0);
    mt->device_memory_used_mib = (double)(total_b - (free_b < total_b ? free_b : total_b)) /
                                 (1024.0 * 1024.0);
  }
  if (ds->nvml == 0) find_in_nvml(ds, ops, dev, log);
  if (ds->nvml < 0) return;
  const double now = esmt_now_s();
  if (ds->sampled_at == 0 || now - ds->sampled_at >= NVML_PERIOD_S) {
    esmt_gpu_sample s = ESMT_GPU_SAMPLE_INIT;
    if (esmt_gpu_sample_bus_id(ds->bus_id, &s) == ESMT_OK) {
      ds->util = s.util_percent;
      ds->temperature = s.temperature_c;
    } else {
      ds->util = ds->temperature = -1; /* a device that fell off the bus: say so, go on */
      esmt_clear_error();
    }
    ds->sampled_at = now;
  }
  mt->device_util_percent = ds->util;
  mt->device_temperature_c = ds->temperature;
}
