/* SPDX-License-Identifier: MIT */
/* What the Hugging Face export (hf_export.c) shares with the PEFT adapter
 * export (peft_export.c). */
#ifndef ESMTRAIN_HF_EXPORT_H
#define ESMTRAIN_HF_EXPORT_H

#include <jansson.h>

#include "esmtrain/esmtrain.h"
#include "internal.h"
#include "out_dir.h"

/* The file that marks a directory as an export esmtrain wrote. */
#define ESMT_EXPORT_MARKER ".esmtrain-export"

/* dir/name with `text`, created (or truncated: dir is a fresh work
 * directory) and fsynced. */
ESMT_HIDDEN esmt_status esmt_hf_write_text(const char *dir, const char *name, const char *text);
/* The same for a JSON value (consumed; NULL: out of memory). */
ESMT_HIDDEN esmt_status esmt_hf_write_json(const char *dir, const char *name, json_t *j);

/* A whole transformers directory into the work directory `dir`: the
 * model's config, tokenizer, weights and the marker. `merge_lora`: LoRA
 * adapters folded into the weights (W += s B A); else the base weights as
 * they are (the adapters go to a PEFT directory). */
ESMT_HIDDEN esmt_status esmt_hf_export_into(esmt_model *m, const char *dir, int merge_lora);

/* Checks a model can be written as a transformers class: a sequence head
 * with mean pooling cannot (transformers' sequence head reads <cls>). */
ESMT_HIDDEN esmt_status esmt_hf_exportable(const esmt_model *m, const char *fn);

/* The rules for a transformers directory's destination (out_dir.h):
 * `overwrite` replaces an earlier export holding only its own files. */
ESMT_HIDDEN esmt_out_dir_rules esmt_hf_export_rules(const char *fn, int overwrite);

#endif
