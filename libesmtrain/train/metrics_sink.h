/* SPDX-License-Identifier: MIT */
/* A run's own metrics files: metrics.jsonl (one JSON object per logged
 * update and per evaluation) and a TensorBoard event file, both in the run
 * directory (docs/formats.md). The trainer writes them on data-parallel
 * rank 0 where it calls the metrics callback. Each step is written once:
 * opening at step S (a resume) drops the jsonl lines past S and starts a
 * TensorBoard session at S + 1, and records at or before a step already
 * written are skipped. A failed part is closed and its error returned
 * once; the caller warns and trains on. */
#ifndef ESMTRAIN_METRICS_SINK_H
#define ESMTRAIN_METRICS_SINK_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

typedef struct esmt_metrics_sink esmt_metrics_sink;

/* Open both files in run_dir at `start_step`. *out is set whenever memory
 * allowed, also when a part failed (that part is then off and the status
 * says why). */
ESMT_HIDDEN esmt_status esmt_metrics_sink_open(const char *run_dir, int64_t start_step,
                                               esmt_metrics_sink **out);

/* `max_steps`: the run's length in updates (0: until the data ends), for
 * readers that show progress. */
ESMT_HIDDEN esmt_status esmt_metrics_sink_train(esmt_metrics_sink *s, const esmt_train_metrics *m,
                                                int64_t max_steps);
ESMT_HIDDEN esmt_status esmt_metrics_sink_eval(esmt_metrics_sink *s, const esmt_eval_metrics *m);

/* Sync both files to disk, close them and free the sink (NULL: nothing). */
ESMT_HIDDEN esmt_status esmt_metrics_sink_close(esmt_metrics_sink *s);

#endif
