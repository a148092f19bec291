/* SPDX-License-Identifier: MIT */
/* A labelled table in memory (esmt_labelled, finetune.h): each row's
 * residues, split and labels, as labelled_read.c leaves them for the
 * loader (labelled_loader.c). */
#ifndef ESMTRAIN_LABELLED_H
#define ESMTRAIN_LABELLED_H

#include "esmtrain/esmtrain.h"
#include "internal.h"

struct esmt_labelled {
  int task;                 /* esmt_head_kind */
  int num_labels;
  int max_len;              /* tokens per row incl. cls/eos */
  char **names;             /* [num_labels] */
  uint64_t rows;
  uint64_t count[3];        /* rows per esmt_labelled_split */
  uint8_t *split;           /* [rows] */
  uint64_t *offset;         /* [rows + 1]: each row's residues in `residues` (cropped) */
  int32_t *residues;
  int32_t *classes;         /* SEQ_CLASS [rows]; RESIDUE_CLASS aligned with residues */
  float *targets;           /* MULTILABEL, REGRESSION: [rows, num_labels] */
};

#endif
