/* SPDX-License-Identifier: MIT */
/* The per-step device figures of esmt_train_metrics (device_*): memory from
 * the backend's mem_info, utilisation and temperature from NVML
 * (base/gpu_monitor.h) for the device of the backend's pci_bus_id. NVML is
 * asked at most once a second (it costs tens of microseconds, and its
 * utilisation is itself an average over a longer period). */
#ifndef ESMTRAIN_DEVICE_STATS_H
#define ESMTRAIN_DEVICE_STATS_H

#include "esmtrain/esmtrain.h"
#include "ops_table.h"
#include "internal.h"

typedef struct esmt_device_stats {
  int nvml;             /* 0: not tried yet, 1: found the device, -1: no NVML or no match */
  char bus_id[32];
  double sampled_at;    /* esmt_now_s() of the last NVML sample */
  double util, temperature;
} esmt_device_stats;

/* Fill mt's device_* fields for (ops, dev): -1 on a host-memory backend,
 * or for a figure that cannot be had. The first failure to find NVML is
 * logged once at debug level through `log` (may be NULL). */
ESMT_HIDDEN void esmt_device_stats_fill(esmt_device_stats *ds, const esmtb_ops *ops,
                                        esmtb_device *dev, const esmt_logger *log,
                                        esmt_train_metrics *mt);

#endif
