/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: typed configuration (YAML, presets, overrides, the schema).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_CONFIG_H
#define ESMTRAIN_CONFIG_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Configuration: typed settings under dotted keys, from YAML and overrides   */
/* ------------------------------------------------------------------------ */

typedef struct esmt_config esmt_config;

typedef enum esmt_config_type {
  ESMT_CONFIG_INT = 0,
  ESMT_CONFIG_DOUBLE = 1,
  ESMT_CONFIG_BOOL = 2,
  ESMT_CONFIG_STRING = 3,
  ESMT_CONFIG_ENUM = 4,       /* a string from a fixed list */
  ESMT_CONFIG_BYTES = 5       /* an integer; "8GiB", "512MiB", "1.5G" accepted */
} esmt_config_type;

typedef struct esmt_config_key {
  uint32_t struct_size;
  const char *name;           /* "optimizer.lr" */
  esmt_config_type type;
  const char *default_value;  /* as text */
  const char *choices;        /* enum choices "esm2|cosine|constant", else NULL */
  double min, max;            /* inclusive bounds of numbers and sizes; max >= 1e18: none */
  const char *doc;            /* one line */
} esmt_config_key;

#define ESMT_CONFIG_KEY_INIT { sizeof(esmt_config_key), NULL, ESMT_CONFIG_INT, NULL, NULL, 0, 0, NULL }

/* Every key at its default (esmt_config_key_info lists them). */
ESMT_API esmt_status esmt_config_create(esmt_config **out);
ESMT_API void esmt_config_destroy(esmt_config *cfg);

/* Set one key from text ("optimizer.lr", "4e-4"), or "key=value" in one
 * string. An unknown key names the closest valid one; a bad value says
 * what is allowed. Setting model.preset fills the model.* sizes. */
ESMT_API esmt_status esmt_config_set(esmt_config *cfg, const char *key, const char *value);
ESMT_API esmt_status esmt_config_set_assignment(esmt_config *cfg, const char *assignment);

/* Apply a YAML file: nested mappings become dotted keys (`optimizer:
 * {lr: 4e-4}` sets optimizer.lr); a top-level `include:` or `base:` (a
 * preset name, a path relative to the file, or a list of them) is applied
 * before the file's own values, and model.preset before the model sizes.
 * An unknown key names the file, the line and the closest valid key; a
 * syntax error names the file, line and column; a missing file is
 * ESMT_ERR_IO. The file is read under esmt_line_reader's policy (data.h):
 * a regular file of at most 1 MiB, or standard input when `path` is "-"
 * or "/dev/stdin" (an include must name a file); a FIFO, device or
 * directory is refused at once (ESMT_ERR_FORMAT), and a NUL byte too.
 * On any failure the configuration is left unchanged. */
ESMT_API esmt_status esmt_config_load_yaml(esmt_config *cfg, const char *path);

/* Directories (colon separated) searched for presets before
 * $ESMTRAIN_CONFIG_PATH, the installed ${datadir}/esmtrain/configs and the
 * source tree the library was built from; NULL or "" clears them. Used by
 * esmt_config_apply_preset, `include:` of a preset name and the preset
 * listing of this handle. */
ESMT_API esmt_status esmt_config_set_preset_path(esmt_config *cfg, const char *dirs);

/* Apply preset NAME (NAME.yaml, the first found in the search path above),
 * like esmt_config_load_yaml. Unknown names list the available ones. */
ESMT_API esmt_status esmt_config_apply_preset(esmt_config *cfg, const char *name);

/* Names of the presets in the default search path (no handle's own
 * directories), sorted, one per line, into buf. A buffer too small is
 * ESMT_ERR_INVALID_ARGUMENT (buf then holds the names that fit). */
ESMT_API esmt_status esmt_config_list_presets(char *buf, size_t cap);

/* One preset file. */
typedef struct esmt_config_preset {
  uint32_t struct_size;
  char name[64];              /* "rtx2080super" */
  char path[4096];            /* the file that preset resolves to */
  char description[256];      /* the file's first comment line, "" if none */
} esmt_config_preset;

#define ESMT_CONFIG_PRESET_INIT { sizeof(esmt_config_preset), {0}, {0}, {0} }

/* Presets visible to cfg (NULL: the default search path), sorted by name;
 * index them 0 <= index < count. info->struct_size must be set. */
ESMT_API esmt_status esmt_config_preset_count(const esmt_config *cfg, int *count);
ESMT_API esmt_status esmt_config_preset_info(const esmt_config *cfg, int index,
                                             esmt_config_preset *info);

/* Cross-field checks: model.hidden_size divisible by model.num_heads with
 * an even head size, data.max_len <= model.max_positions, a token budget
 * holding a row, train.tokens_per_update >= one micro-batch, warmup below
 * train.max_steps, decaying schedules needing train.max_steps, precision
 * the backend supports, sizes with units. Messages name the keys. Memory
 * is not checked here (esmt_plan_memory does that). */
ESMT_API esmt_status esmt_config_validate(const esmt_config *cfg);

/* The memory-planner request a configuration makes: the model's sizes, the
 * micro-batch shape (data.micro_batch rows, or data.tokens_per_batch /
 * data.max_len rounded up, of data.max_len tokens), backend.precision
 * resolved on ctx's backend as the trainer resolves it ("auto" included;
 * with ctx NULL, auto is planned as fp32), a CUDA context's 512 MiB for
 * half precision on a device backend (any half precision when ctx is
 * NULL), backend.device_memory_limit, and the offload policies (auto
 * offload.optimizer is off under dist.zero 1). The trainer, `plan`,
 * `config --validate` and `train --validate` all use it, so the plan
 * printed is the plan applied. */
ESMT_API esmt_status esmt_config_plan_request(const esmt_config *cfg, const esmt_context *ctx,
                                              esmt_model_config *model,
                                              esmt_plan_request *request);

ESMT_API esmt_status esmt_config_get_int(const esmt_config *cfg, const char *key, int64_t *value);
ESMT_API esmt_status esmt_config_get_double(const esmt_config *cfg, const char *key, double *value);
ESMT_API esmt_status esmt_config_get_bool(const esmt_config *cfg, const char *key, int *value);
/* Byte-size keys (backend.device_memory_limit, ...). get_int reads them too. */
ESMT_API esmt_status esmt_config_get_bytes(const esmt_config *cfg, const char *key,
                                           uint64_t *value);
/* Strings and enums; the pointer lives as long as the config is unchanged. */
ESMT_API esmt_status esmt_config_get_string(const esmt_config *cfg, const char *key,
                                            const char **value);

/* The resolved configuration as YAML, every key with its value and, as a
 * comment, its doc, choices and default (malloc'ed; free() it). Loading
 * it back gives the same values. */
ESMT_API esmt_status esmt_config_to_yaml(const esmt_config *cfg, char **yaml);

/* A whole training run from a configuration: the model (model.*, on the
 * context's backend, initialised from train.seed), the training loader
 * (data.*; train.overfit_batches repeats the first N batches), the
 * validation loader (fixed masking; none with train.fast_dev_run or
 * train.eval_every 0), and a trainer with the optimizer, schedule and
 * train.* settings. From `base` only the callbacks (metrics, progress),
 * gemm_ceiling_gflops and config_text are taken. The trainer owns what it
 * created: esmt_trainer_destroy releases all of it. */
ESMT_API esmt_status esmt_trainer_create_from_config(esmt_context *ctx, const esmt_config *cfg,
                                                     const esmt_trainer_options *base,
                                                     esmt_trainer **out);

/* The model a trainer drives. */
ESMT_API esmt_model *esmt_trainer_model(esmt_trainer *trainer);

/* Parse a byte size: "8GiB", "512MiB", "1.5G", "1e9", "1000000" (K/M/G/T are
 * binary, KB/MB/GB/TB decimal). Values beyond 2^64 are refused. */
ESMT_API esmt_status esmt_parse_size(const char *text, uint64_t *bytes);

/* The schema: every key's name, type, default, choices, bounds and doc
 * (static strings), for 0 <= index < esmt_config_key_count(). */
ESMT_API int esmt_config_key_count(void);
ESMT_API esmt_status esmt_config_key_info(int index, esmt_config_key *info);

#endif /* ESMTRAIN_CONFIG_H */
