/* SPDX-License-Identifier: MIT */
/* Resuming a run with the settings it was trained with. A checkpoint
 * records the run's configuration (state.json trainer.config, the YAML of
 * esmt_config_to_yaml), its world size and its dataset's manifest.json
 * crc32; a resume compares them with its own. Changes that break an exact
 * continuation (the optimizer, schedule, batches, data, model, precision)
 * are refused, listing each key old -> new; changes that leave the
 * updates as they were (a longer run, evaluation/saving/logging frequency,
 * threads, memory options) are warned about and recorded. The table of
 * keys is in docs/formats.md ("Resuming"). */
#ifndef ESMTRAIN_RESUME_CHECK_H
#define ESMTRAIN_RESUME_CHECK_H

#include <jansson.h>

#include "internal.h"

typedef struct esmt_resume_run {
  const char *config;      /* the YAML text, NULL when not known */
  int world;               /* data-parallel ranks, 0 when not known */
  json_int_t manifest_crc; /* the dataset's manifest.json crc32, -1 when not known */
} esmt_resume_run;

/* Compare the recorded run with the resuming one at step `step`. Refused
 * changes: ESMT_ERR_CONFIG naming each. Allowed changes: a warning for
 * each through `lg` and {key, old, new, step} appended to `changes`,
 * only when nothing is refused. ckpt_dir is named in the message. */
ESMT_HIDDEN esmt_status esmt_resume_check(const esmt_resume_run *was, const esmt_resume_run *now,
                                          const char *ckpt_dir, int64_t step,
                                          const esmt_logger *lg, json_t *changes);

/* crc32 of data.train_dir/manifest.json of a configuration's YAML text:
 * 0 and *crc set, or -1 when there is none to read. */
ESMT_HIDDEN int esmt_resume_manifest_crc(const char *config, uint32_t *crc);

#endif
