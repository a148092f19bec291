/* SPDX-License-Identifier: MIT */
/* TensorBoard event files: scalars and session starts as Event protobufs
 * (tensorboard_event.proto) in TFRecord framing, the format TensorBoard
 * and tf.summary read. One writer per file; every record is written with
 * one write(2), so a reader sees whole records as they come. */
#ifndef ESMTRAIN_TFEVENTS_H
#define ESMTRAIN_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct esmt_tfevents esmt_tfevents;

typedef struct esmt_tfevents_scalar {
  const char *tag;
  double value; /* stored as a float, as TensorBoard's simple_value */
} esmt_tfevents_scalar;

/* A new event file in `dir` (which must exist):
 * events.out.tfevents.<unix seconds>.<hostname>.<pid>.esmtrain, its first
 * record the file version "brain.Event:2". */
ESMT_HIDDEN esmt_status esmt_tfevents_open(const char *dir, esmt_tfevents **out);

/* One event at `step` holding n scalars (wall time: now). */
ESMT_HIDDEN esmt_status esmt_tfevents_scalars(esmt_tfevents *w, int64_t step,
                                              const esmt_tfevents_scalar *v, size_t n);

/* A SessionLog START at `step`: TensorBoard drops what earlier files hold
 * at this step and later (the steps a resumed run writes again). */
ESMT_HIDDEN esmt_status esmt_tfevents_session_start(esmt_tfevents *w, int64_t step);

/* fsync: what was written survives a crash. */
ESMT_HIDDEN esmt_status esmt_tfevents_flush(esmt_tfevents *w);

/* Flush, close and free (NULL: nothing); the first error is returned, the
 * writer is freed either way. */
ESMT_HIDDEN esmt_status esmt_tfevents_close(esmt_tfevents *w);

ESMT_HIDDEN const char *esmt_tfevents_path(const esmt_tfevents *w);

/* CRC-32C (Castagnoli; "123456789" gives 0xE3069283) and the TFRecord
 * mask applied to the CRCs stored in a record. */
ESMT_HIDDEN uint32_t esmt_crc32c(const void *data, size_t n);
ESMT_HIDDEN uint32_t esmt_tfrecord_masked_crc(const void *data, size_t n);

#endif
