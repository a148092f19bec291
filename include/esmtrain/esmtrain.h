/* SPDX-License-Identifier: MIT */
/*
 * esmtrain: train ESM-2 protein language models from C.
 *
 * This is the only header a consumer includes. Everything declared here is
 * part of the stable ABI (see docs/ABI.md); symbols not declared here are
 * hidden in libesmtrain.so.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - it returns an esmt_status; ESMT_OK (0) is success;
 *  - on failure it sets a per-thread message readable with esmt_last_error();
 *  - handles are opaque, created by *_create and released by *_destroy, and
 *    every *_destroy accepts NULL;
 *  - options structs begin with `struct_size`; fill them with the matching
 *    *_INIT macro or *_init() function so that a newer library can tell how
 *    much of the struct an older caller knows about;
 *  - the library never prints, exits or aborts on its own: it reports through
 *    return codes and the log/progress callbacks.
 *
 * Threads: a rule per handle (tests/test_threads.c proves each under
 * ThreadSanitizer):
 *  - esmt_context: shared. Any number of threads may create models,
 *    loaders and trainers on one context and call its queries at once;
 *    esmt_context_set_option and esmt_context_destroy need every other
 *    call on it (and on what was made from it) to have ended.
 *  - esmt_model: one call at a time. The calls that use its buffers
 *    (forward, backward, infer, zero_grad, grad_norm, optimizer_step,
 *    read_tensor, write_tensor, and a trainer's step and evaluate on it)
 *    check this: a call from a second thread while one runs returns
 *    ESMT_ERR_STATE naming the call in progress and its thread, and does
 *    nothing. Give each thread its own model (on one shared context) to
 *    run in parallel.
 *  - esmt_trainer: one thread at a time (its model's check above refuses
 *    a second one), except esmt_trainer_request_stop: any thread, or a
 *    signal handler.
 *  - esmt_loader, esmt_sequence_reader, esmt_line_reader, esmt_config,
 *    and the handles of infer.h and the metrics reader (batch builders,
 *    scorers, npy streams, esmt_metrics_reader): one thread at a time, not
 *    checked; separate handles over the same files are independent and may
 *    run on separate threads at once. Calls that run a model (esmt_embed,
 *    the scorers) are under the model's check above.
 *  - esmt_last_error() is per thread; log and progress callbacks are called
 *    on the thread that made the call (they must be thread-safe when the
 *    program calls from several threads).
 */
#ifndef ESMTRAIN_ESMTRAIN_H
#define ESMTRAIN_ESMTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version, status codes and errors, logging: the part of the API every other
 * part uses (the core includes it alone). */
#include "base.h"

/* ------------------------------------------------------------------------ */
/* Machine description                                                       */
/* ------------------------------------------------------------------------ */

typedef struct esmt_cpu_info {
  uint32_t struct_size;
  char vendor[16];
  char model[64];
  int logical_cores;    /* online logical CPUs */
  int avx2;             /* 1 when the CPU and OS support it */
  int fma;
  int avx512f;
  int avx512bf16;
  int amx_tile;
  int amx_bf16;
} esmt_cpu_info;

#define ESMT_CPU_INFO_INIT { sizeof(esmt_cpu_info), {0}, {0}, 0, 0, 0, 0, 0, 0, 0 }

/* Fill *info with this machine's CPU features. info->struct_size must be set. */
ESMT_API esmt_status esmt_cpu_info_query(esmt_cpu_info *info);

/* The live state of this machine's NVIDIA GPUs, from NVIDIA's management
 * library (NVML, libnvidia-ml.so.1 of the driver), loaded on first use:
 * esmtrain neither links it nor needs it. A value the driver does not give
 * is -1. */
typedef struct esmt_gpu_sample {
  uint32_t struct_size;
  int index;                  /* NVML's index (all GPUs, whatever CUDA_VISIBLE_DEVICES says) */
  char name[96];
  char pci_bus_id[32];        /* "00000000:3B:00.0" */
  double util_percent;        /* busy share over the driver's last sample period, 0-100 */
  double memory_util_percent; /* memory-controller busy share, 0-100 */
  uint64_t memory_used_bytes, memory_total_bytes;
  double temperature_c;
  double power_w;
} esmt_gpu_sample;

#define ESMT_GPU_SAMPLE_INIT ESMT_SIZED_INIT_(esmt_gpu_sample)

/* Sample up to `capacity` GPUs into out[] (each element's struct_size set by
 * the caller, all alike); *count gets the number of GPUs NVML sees (also
 * when larger than capacity). Without NVML or without NVIDIA GPUs it fails
 * with ESMT_ERR_UNSUPPORTED and the reason (no driver library, no device)
 * and *count = 0; that is the normal answer on a machine without them. */
ESMT_API esmt_status esmt_gpu_sample_all(esmt_gpu_sample *out, int capacity, int *count);

/* ------------------------------------------------------------------------ */
/* New output files, whole or not at all                                     */
/* ------------------------------------------------------------------------ */

/* A file an application writes for its user (a figure, a table) without
 * ever harming what is there: the data go to a temporary created with
 * O_CREAT | O_EXCL | O_NOFOLLOW beside the destination, and commit
 * publishes it whole; the destination is never followed through a
 * symbolic link, never truncated, and replaced only when the caller
 * accepted the file found there. */
typedef struct esmt_output_file esmt_output_file;

/* Whether an existing destination may be replaced: `fd` is open read-only
 * on it (a regular file, opened without following a link). Returns 1 to
 * allow; else 0 with the reason in why ("is not a plot written by ..."). */
typedef int (*esmt_output_replace_fn)(int fd, void *user, char *why, size_t cap);

/* Start writing `path` (mode 0666 less the umask). ESMT_ERR_STATE, with a
 * message naming path, when it exists and is a symbolic link, not a
 * regular file, or a file `may_replace` (NULL: none may be) refuses;
 * ESMT_ERR_IO when the temporary cannot be created. Then write to
 * esmt_output_file_fd(*out), and commit or abort. */
ESMT_API esmt_status esmt_output_file_begin(const char *path, esmt_output_replace_fn may_replace,
                                            void *user, esmt_output_file **out);

/* The temporary's descriptor and path (a signal handler may unlink it). */
ESMT_API int esmt_output_file_fd(const esmt_output_file *f);
ESMT_API const char *esmt_output_file_temp_path(const esmt_output_file *f);

/* fsync the temporary and publish it as the path: a new file by link(), so
 * that one that appeared meanwhile is not replaced; an accepted one by
 * rename(), only while it is still the file that was accepted. Frees f;
 * on failure the temporary is removed and the destination left as it was. */
ESMT_API esmt_status esmt_output_file_commit(esmt_output_file *f);

/* Remove the temporary and free f (NULL is fine). */
ESMT_API void esmt_output_file_abort(esmt_output_file *f);

/* Files a program creates in its output directory and re-opens later (a
 * resume), without ever writing into a file it did not create: created
 * with O_EXCL | O_NOFOLLOW, re-opened only without following a symbolic
 * link, only as a regular file with a single link, and only while it is
 * the file recorded at its creation: "DEV:INO:BIRTH" (statx's creation
 * time tells apart a file that took a deleted one's inode number;
 * "DEV:INO" where the file system keeps none). */
#define ESMT_OWNED_FILE_ID_CAP 80

/* Create `path` read-write; it must not exist (a link there is not
 * followed). ESMT_ERR_IO naming path and why. */
ESMT_API esmt_status esmt_owned_file_create(const char *path, int *fd);
/* Re-open `path` read-write: a regular file of one link, not reached
 * through a symbolic link, whose id is `recorded`. ESMT_ERR_STATE naming
 * why it is not the program's file (nothing is changed). */
ESMT_API esmt_status esmt_owned_file_reopen(const char *path, const char *recorded, int *fd);
/* The id of an open file into out[cap] ("" when statx fails). */
ESMT_API void esmt_owned_file_id(int fd, char *out, size_t cap);
/* 1 when `path` (not followed) is a regular file of one link whose id is
 * `recorded` (NULL: any): a leftover of the program's that it may remove. */
ESMT_API int esmt_owned_file_is_own(const char *path, const char *recorded);

/* ------------------------------------------------------------------------ */
/* Context: backend registry, threads, callbacks                             */
/* ------------------------------------------------------------------------ */

typedef struct esmt_context esmt_context;

typedef struct esmt_context_options {
  uint32_t struct_size;
  /* Colon-separated directories to load backends from. When set, ONLY these
   * are searched; otherwise $ESMTRAIN_BACKEND_PATH, and when that is unset
   * too, the esmtrain-MAJOR.MINOR/backends directory next to the loaded
   * libesmtrain.so (esmtrain/backends in a build tree), then the configured
   * ${libdir}/esmtrain-MAJOR.MINOR/backends. The current directory
   * never is. A backend whose name an earlier directory already provided is
   * listed as shadowed and not used (a warning names both files). */
  const char *backend_path;
  /* Force a backend by name ("cpu", "turing_fp16", ...). NULL: use
   * $ESMTRAIN_BACKEND if set, else the highest probe score. */
  const char *backend;
  int num_threads;            /* CPU threads; 0 = all online cores */
  esmt_log_fn log;            /* NULL: the process-wide sink */
  void *log_user;
  esmt_log_level log_level;   /* minimum level delivered to `log` */
  /* Progress of long operations of this context's objects that have no
   * callback of their own: a trainer's stages "train", "eval" and "save"
   * (when esmt_trainer_options.progress is NULL) and the GEMM ceiling
   * measurement ("gemm", cancellable). May be NULL. */
  esmt_progress_fn progress;
  void *progress_user;
  /* Describes the job so backends can score themselves (0 = unknown). */
  uint64_t job_param_count;
  int job_seq_len;
  int job_micro_batch;
  /* Appended field (a caller whose struct_size ends before it gets 0): the
   * device memory each model may allocate on the backend, in bytes (the
   * config's backend.device_memory_limit); 0 = no limit. An allocation past
   * it fails with ESMT_ERR_OUT_OF_MEMORY and advice (smaller micro-batch,
   * recompute, optimizer offload); esmt_plan_request.device_budget is the
   * same figure for the planner. Also settable with
   * esmt_context_set_option(ctx, "device_memory_limit", "8GiB"). */
  uint64_t device_memory_limit;
} esmt_context_options;

#define ESMT_CONTEXT_OPTIONS_INIT \
  { sizeof(esmt_context_options), NULL, NULL, 0, NULL, NULL, ESMT_LOG_INFO, NULL, NULL, 0, 0, 0, 0 }

/* Same as assigning ESMT_CONTEXT_OPTIONS_INIT. */
ESMT_API esmt_status esmt_context_options_init(esmt_context_options *opts);

/* Load backends, probe them, choose one. opts may be NULL for defaults.
 * Fails with ESMT_ERR_NO_BACKEND when no directory holds a usable backend
 * or a forced backend is unknown/unavailable (the message lists what was
 * found and why each is unusable). *out is NULL on failure. */
ESMT_API esmt_status esmt_context_create(const esmt_context_options *opts, esmt_context **out);

ESMT_API void esmt_context_destroy(esmt_context *ctx);

/* Set a tunable by name from a string, e.g. ("num_threads", "4"),
 * ("log_level", "debug") or ("device_memory_limit", "8GiB"; applies to
 * models created afterwards). An unknown name is ESMT_ERR_INVALID_ARGUMENT with
 * a message naming the closest valid one. */
ESMT_API esmt_status esmt_context_set_option(esmt_context *ctx, const char *name, const char *value);

/* Bounds of an integer tunable (e.g. "num_threads"): [*min, *max]. */
ESMT_API esmt_status esmt_context_option_bounds(const esmt_context *ctx, const char *name,
                                                int64_t *min, int64_t *max);

/* One device a backend can drive. */
typedef struct esmt_device_info {
  uint32_t struct_size;
  char name[128];
  int cc_major, cc_minor;     /* compute capability; 0.0 for CPU */
  uint64_t total_bytes;       /* device memory (host RAM for CPU) */
  uint64_t free_bytes;
} esmt_device_info;

#define ESMT_DEVICE_INFO_INIT ESMT_SIZED_INIT_(esmt_device_info)

#define ESMT_MAX_DEVICES 16

/* What the registry found: one entry per backend file examined. */
typedef struct esmt_backend_info {
  uint32_t struct_size;
  char name[32];              /* "cpu", or the file name when it did not load */
  char path[512];             /* file it was loaded from */
  char description[128];
  int loaded;                 /* the file loaded and its ABI was accepted */
  int available;              /* it can run on this machine */
  int score;                  /* 0 when unavailable; highest wins */
  int chosen;                 /* the one the context uses */
  char reason[256];           /* why unavailable / not loaded; "" otherwise */
  int device_count;
  esmt_device_info devices[ESMT_MAX_DEVICES];
  char note[256];             /* what the probe says of itself (kernels, threads) */
} esmt_backend_info;

#define ESMT_BACKEND_INFO_INIT ESMT_SIZED_INIT_(esmt_backend_info)

/* Number of backend files the context examined (loaded or not). */
ESMT_API esmt_status esmt_context_backend_count(const esmt_context *ctx, int *count);

/* Details of backend `index` (0 <= index < count). info->struct_size must
 * be set (sizeof(esmt_backend_info) or that of an older version). */
ESMT_API esmt_status esmt_context_backend_info(const esmt_context *ctx, int index,
                                               esmt_backend_info *info);

/* Name of the chosen backend; static for the context's lifetime. */
ESMT_API const char *esmt_context_backend_name(const esmt_context *ctx);

/* Measure the chosen backend's GEMM throughput on an m x n x k product in
 * its compute precision (fp32 on cpu): the best of `repeats` timed runs
 * after one warm-up, in GFLOP/s. This is the ceiling MFU is quoted against. */
ESMT_API esmt_status esmt_context_gemm_ceiling(esmt_context *ctx, int m, int n, int k,
                                               int repeats, double *gflops);

/* Appended (0.2, issue #36): measure the host link of the chosen backend:
 * copies of `bytes` between page-locked host memory and device memory,
 * the best of `repeats` timed copies each way after one warm-up, in bytes
 * per second (*h2d host to device, *d2h back). What the planner's
 * expected streaming overhead (esmt_plan_request.link_bandwidth) is
 * computed from; on cpu both are host memcpy speeds. */
ESMT_API esmt_status esmt_context_copy_bandwidth(esmt_context *ctx, uint64_t bytes, int repeats,
                                                 double *h2d, double *d2h);

/* ------------------------------------------------------------------------ */
/* Model: the ESM-2 masked-LM graph on the context's backend                 */
/* ------------------------------------------------------------------------ */

/* Token ids of the fixed ESM-2 alphabet that the model API relies on. */
enum {
  ESMT_TOKEN_CLS = 0,
  ESMT_TOKEN_PAD = 1,
  ESMT_TOKEN_EOS = 2,
  ESMT_TOKEN_UNK = 3,
  ESMT_TOKEN_MASK = 32,
  ESMT_VOCAB_SIZE = 33,
  ESMT_LABEL_IGNORE = -100  /* label of a position that is not scored */
};

/* Compute precision. Half precisions keep fp32 master weights, gradients
 * and AdamW moments, and compute on fp16/bf16 weight copies and
 * activations (LayerNorm, softmax and loss statistics stay fp32). */
typedef enum esmt_precision {
  ESMT_PRECISION_FP32 = 0,
  ESMT_PRECISION_FP16 = 1,   /* fp16 compute copies, fp32 master weights */
  ESMT_PRECISION_BF16 = 2,
  /* The backend's best: fp32 on a host-memory (CPU) backend, else bf16
   * when it has ESMTB_CAP_BF16, else fp16 with ESMTB_CAP_F16, else fp32.
   * Only for esmt_model_config.precision (the planner needs a concrete one). */
  ESMT_PRECISION_AUTO = 3
} esmt_precision;

/* The same in a given compute precision (FP32, FP16 or BF16): the ceiling
 * MFU is quoted against for a model training in that precision. */
ESMT_API esmt_status esmt_context_gemm_ceiling_precision(esmt_context *ctx,
                                                         esmt_precision precision, int m, int n,
                                                         int k, int repeats, double *gflops);

/* The optimizer. There is no learning rate here: it has one source, the
 * schedule (esmt_schedule.peak_lr) in a trainer, or the caller's argument
 * to esmt_model_optimizer_step in a loop of one's own. */
typedef enum esmt_optimizer_kind {
  /* Decoupled weight decay (Loshchilov & Hutter), ESM-2's optimizer: two
   * fp32 moments per parameter. */
  ESMT_OPTIMIZER_ADAMW = 0,
  /* Lion (Chen et al. 2023): the sign of an interpolated momentum, one fp32
   * moment per parameter (half of AdamW's state). Its authors advise a
   * learning rate 3-10x smaller and a weight decay 3-10x larger than
   * AdamW's; esmt_optimizer_config_init(LION) sets beta2 0.99, decay 0.1. */
  ESMT_OPTIMIZER_LION = 1
} esmt_optimizer_kind;

/* A task head on the encoder's last representation (after the final
 * LayerNorm), as transformers' EsmForSequenceClassification (the pooled
 * row -> classifier.dense -> tanh -> classifier.out_proj) and
 * EsmForTokenClassification (classifier per residue). */
typedef enum esmt_head_kind {
  ESMT_HEAD_NONE = 0,          /* the masked-LM head and loss (pre-training) */
  ESMT_HEAD_SEQ_CLASS = 1,     /* one class of num_labels per sequence, cross-entropy */
  ESMT_HEAD_MULTILABEL = 2,    /* num_labels independent 0/1 labels, BCE with logits */
  ESMT_HEAD_REGRESSION = 3,    /* num_labels real targets per sequence, mean squared error */
  ESMT_HEAD_RESIDUE_CLASS = 4  /* one class per residue, cross-entropy over labelled ones */
} esmt_head_kind;

/* What a sequence head reads: the <cls> position (transformers') or the
 * mean over the residues (not <cls>, <eos> or padding). */
typedef enum esmt_pooling { ESMT_POOL_CLS = 0, ESMT_POOL_MEAN = 1 } esmt_pooling;

/* esmt_model_config.frozen_layers: the whole encoder (embedding, layers,
 * final LayerNorm) frozen; only the task head trains. */
enum { ESMT_FREEZE_ENCODER = -1 };

typedef struct esmt_model_config {
  uint32_t struct_size;
  int num_layers;           /* L */
  int hidden_size;          /* d */
  int num_heads;            /* H; d % H == 0 and d/H even (rotary) */
  int ffn_size;             /* 0 = 4 * d */
  int vocab_size;           /* 33 for ESM-2 */
  int max_positions;        /* longest row, cls/eos included; 1024 for ESM-2 */
  float layer_norm_eps;     /* 1e-5 */
  float mask_ratio_train;   /* token dropout constant, 0.15 * 0.8 */
  /* Appended field: a caller whose struct_size ends before it gets AUTO.
   * esmt_model_create refuses a precision the backend lacks
   * (ESMT_ERR_UNSUPPORTED); esmt_model_get_config reports the resolved one. */
  esmt_precision precision;
  /* Appended: the optimizer whose state the model holds (its buffers are
   * allocated with the model); a caller whose struct_size ends before it
   * gets ADAMW. esmt_model_optimizer_step refuses another kind. */
  esmt_optimizer_kind optimizer;
  /* Appended (fine-tuning, docs/finetune.md): the task head on the encoder
   * in place of the masked-LM loss (ESMT_HEAD_NONE: pre-training), its
   * output count (classes, labels or regression targets) and the sequence
   * heads' pooling. A caller whose struct_size ends before them gets the
   * masked-LM model. */
  esmt_head_kind head;
  int num_labels;
  esmt_pooling pooling;
  /* Appended: what does not train. 0 everything; N > 0 the embedding and
   * the first N layers; ESMT_FREEZE_ENCODER the whole encoder (the head
   * only). Frozen weights get no update, no gradient and no optimizer
   * moments; with a task head the masked-LM head is frozen too. */
  int frozen_layers;
  /* Appended: LoRA adapters (peft's LoraConfig; docs/finetune.md) when
   * lora_rank > 0: on each layer's linear maps named in lora_targets
   * (ESMT_LORA_* bits), y = x W^T + b + (lora_alpha / lora_rank) (x A^T) B^T
   * with A [rank, in] and B [out, rank] trained and every encoder weight
   * frozen (frozen_layers must be 0; the task head trains). lora_dropout
   * in [0, 1): peft's dropout on each adapter's input (its own mask per
   * adapter, kept values scaled by 1 / (1 - lora_dropout)) in training
   * forwards (esmt_model_forward; none at inference or under
   * esmt_model_set_training(model, 0)). */
  int lora_rank;
  float lora_alpha;
  float lora_dropout;
  unsigned lora_targets;
} esmt_model_config;

/* esmt_model_config.lora_targets: transformers' module names. */
#define ESMT_LORA_QUERY 1u      /* attention.self.query */
#define ESMT_LORA_KEY 2u        /* attention.self.key */
#define ESMT_LORA_VALUE 4u      /* attention.self.value */
#define ESMT_LORA_ATTN_OUT 8u   /* attention.output.dense */
#define ESMT_LORA_FFN_DOWN 16u  /* output.dense (the FFN's second linear map) */
#define ESMT_LORA_FFN_UP 32u    /* intermediate.dense (the FFN's first linear map) */

#define ESMT_MODEL_CONFIG_INIT \
  { sizeof(esmt_model_config), 6, 320, 20, 0, 33, 1024, 1e-5f, 0.12f, ESMT_PRECISION_AUTO, \
    ESMT_OPTIMIZER_ADAMW, ESMT_HEAD_NONE, 0, ESMT_POOL_CLS, 0, 0, 0.0f, 0.0f, 0u }

/* Fill *cfg with a named ESM-2 size: esm2_t6_8M, esm2_t12_35M, esm2_t30_150M,
 * esm2_t33_650M, esm2_t36_3B, esm2_t48_15B. cfg->struct_size must be set.
 * An unknown name is ESMT_ERR_INVALID_ARGUMENT naming the closest preset. */
ESMT_API esmt_status esmt_model_config_preset(const char *name, esmt_model_config *cfg);

/* Parameter count of a config (the tied decoder counted once). */
ESMT_API esmt_status esmt_model_config_param_count(const esmt_model_config *cfg,
                                                   uint64_t *count);

typedef struct esmt_model esmt_model;

/* Build a model on the context's backend with HF-style initialisation from
 * `seed`: normal(0, 0.02) weights and embedding, zero biases, LayerNorm
 * 1/0, the <pad> embedding row zero. Gradients and AdamW moments start at
 * zero. The context must outlive the model. */
ESMT_API esmt_status esmt_model_create(esmt_context *ctx, const esmt_model_config *cfg,
                                       uint64_t seed, esmt_model **out);

ESMT_API void esmt_model_destroy(esmt_model *model);

/* The config the model was built with (copied into *cfg, up to its size). */
ESMT_API esmt_status esmt_model_get_config(const esmt_model *model, esmt_model_config *cfg);

/* Which flat buffer a tensor accessor addresses. */
typedef enum esmt_buffer {
  ESMT_BUF_PARAMS = 0,      /* fp32 master weights */
  ESMT_BUF_GRADS = 1,       /* fp32 gradients */
  ESMT_BUF_ADAM_M = 2,      /* AdamW first moment */
  ESMT_BUF_ADAM_V = 3       /* AdamW second moment */
} esmt_buffer;

typedef struct esmt_tensor_info {
  uint32_t struct_size;
  char name[96];            /* Hugging Face EsmForMaskedLM name */
  int ndim;
  int64_t shape[4];
  uint64_t numel;
  uint64_t offset;          /* element offset in the flat fp32 buffers */
} esmt_tensor_info;

#define ESMT_TENSOR_INFO_INIT ESMT_SIZED_INIT_(esmt_tensor_info)

/* Number of named tensors (HF names; lm_head.decoder.weight is the tied
 * embedding and is not listed separately). */
ESMT_API esmt_status esmt_model_tensor_count(const esmt_model *model, int *count);

/* Name, shape and offset of tensor `index`. */
ESMT_API esmt_status esmt_model_tensor_info(const esmt_model *model, int index,
                                            esmt_tensor_info *info);

/* Index of the tensor named `name`, or ESMT_ERR_INVALID_ARGUMENT. Accepts
 * "lm_head.decoder.weight" as an alias of the embedding. */
ESMT_API esmt_status esmt_model_find_tensor(const esmt_model *model, const char *name,
                                            int *index);

/* Copy `count` fp32 values of a named tensor out of / into a buffer. count
 * must equal the tensor's numel. ESMT_BUF_PARAMS is the fp32 master; in
 * half precision a write also refreshes the tensor's compute copy. Under
 * ZeRO (dist.zero 1: the moments; 2: the gradients too, and in half
 * precision the fp32 master; 3: the master always) a rank holds its shard
 * only: a tensor outside it is ESMT_ERR_STATE. At stage 3 writing
 * ESMT_BUF_PARAMS is ESMT_ERR_UNSUPPORTED (the weights are gathered per
 * layer; load a checkpoint instead). */
ESMT_API esmt_status esmt_model_read_tensor(esmt_model *model, const char *name,
                                            esmt_buffer which, float *dst, uint64_t count);
ESMT_API esmt_status esmt_model_write_tensor(esmt_model *model, const char *name,
                                             esmt_buffer which, const float *src,
                                             uint64_t count);

/* Total parameter count (= length of every flat buffer). */
ESMT_API esmt_status esmt_model_param_count(const esmt_model *model, uint64_t *count);

/* One micro-batch of right-padded rows. */
typedef struct esmt_batch {
  uint32_t struct_size;
  int batch;                /* B rows */
  int seq_len;              /* T positions per row, <= max_positions */
  const int32_t *tokens;    /* [B*T] ids; rows right-padded with ESMT_TOKEN_PAD */
  const int32_t *labels;    /* [B*T] target id, or ESMT_LABEL_IGNORE; NULL = none */
  /* Divide the summed loss (and gradients) by this many selected positions;
   * 0 = the selected count of this batch (the mean). The trainer passes the
   * count of the whole update when accumulating micro-batches. */
  double loss_normalizer;
  /* Appended (packed rows; a caller whose struct_size ends before it has
   * right-padded rows). num_segments > 0: several sequences share a row;
   * sequence s covers the flattened positions [seg_start[s], seg_start[s] +
   * seg_len[s]) of tokens, inside one row, ascending and disjoint;
   * positions in no sequence are padding (ESMT_TOKEN_PAD, no label).
   * Attention never crosses a sequence boundary, rotary positions restart
   * at each sequence's start, token dropout is scaled per sequence. Needs a
   * backend with packed-row support (ESMTB_CAP_VARLEN). 0: right-padded. */
  int num_segments;
  const int32_t *seg_start;  /* [num_segments] */
  const int32_t *seg_len;    /* [num_segments], >= 1 */
  /* Appended (a sequence head, esmt_model_config.head): the targets of the
   * B rows, [B] class indices (ESMT_HEAD_SEQ_CLASS; ESMT_LABEL_IGNORE: the
   * row is not scored) or [B, num_labels] 0/1 labels (MULTILABEL) or
   * values (REGRESSION). A residue head reads `labels` (class per
   * position). Right-padded rows only. */
  const float *targets;
  /* Appended: SEQ_CLASS's class weights [num_labels] (NULL: all 1): the
   * loss is sum_b w[y_b] nll_b / sum_b w[y_b], as torch's
   * CrossEntropyLoss(weight=w). */
  const float *class_weights;
} esmt_batch;

#define ESMT_BATCH_INIT { sizeof(esmt_batch), 0, 0, NULL, NULL, 0.0, 0, NULL, NULL, NULL, NULL }

typedef struct esmt_forward_result {
  uint32_t struct_size;
  double loss;              /* summed CE / normalizer; 0 when nothing selected */
  double loss_sum;          /* summed CE over selected positions */
  uint64_t selected;        /* positions with a label */
  uint64_t real_tokens;     /* non-pad positions (packed: the sequences' tokens) */
} esmt_forward_result;

#define ESMT_FORWARD_RESULT_INIT { sizeof(esmt_forward_result), 0.0, 0.0, 0, 0 }

/* Forward pass: loss over the labelled positions; logits [B*T*V] copied out
 * as fp32 (widened from the compute precision) when `logits` is non-NULL
 * (pad positions are 0). Keeps the activations for esmt_model_backward.
 * With a task head the loss is the head's and `logits` receives its
 * outputs: [B, num_labels] for a sequence head, [B, T, num_labels] for a
 * residue head (pad positions 0). */
ESMT_API esmt_status esmt_model_forward(esmt_model *model, const esmt_batch *batch,
                                        esmt_forward_result *result, float *logits);

/* Inference without gradient bookkeeping: the activation memory of one
 * layer plus two residual buffers, whatever the depth. The caller's batch
 * is as for esmt_model_forward (labels ignored), right-padded or packed.
 * Outputs are fp32, into the caller's buffers, for representations in
 * fair-esm's repr_layers numbering (transformers' hidden_states agree): 0
 * the embedding output (token dropout applied), l in 1..L-1 the output of
 * block l, L the last block's output after the final LayerNorm; -1 means
 * L. "Rows" below are the batch's rows when right-padded, its sequences
 * (num_segments) when packed: a mean or cls is one per protein. */
#define ESMT_INFER_PER_TOKEN 1u /* per_token [batch, seq_len, hidden]; positions in no
                                 * protein (padding) zero */
#define ESMT_INFER_MEAN 2u      /* mean [rows, hidden] over each protein's residues (not
                                 * cls, eos or padding), as fair-esm's extract.py */
#define ESMT_INFER_CLS 4u       /* cls [rows, hidden]: each protein's first position */
#define ESMT_INFER_LOGITS 8u    /* logits [batch, seq_len, 33]; padding zero */
#define ESMT_INFER_HEAD 16u     /* head: the task head's outputs (esmt_model_config.head),
                                 * [batch, num_labels] for a sequence head, [batch, seq_len,
                                 * num_labels] for a residue head (padding zero); right-padded
                                 * rows only */
#define ESMT_INFER_ATTENTION 32u /* attention (appended field): every layer's softmax
                                  * probabilities, see below */

typedef struct esmt_infer_request {
  uint32_t struct_size;
  int layer;          /* -1 (= L) or 0..L; used when num_layers is 0 */
  unsigned outputs;   /* ESMT_INFER_* bits */
  float *per_token, *mean, *cls, *logits;
  /* Appended (0.2): several representations from one pass. num_layers > 0:
   * layers[k] (-1 = L, 0..L, no repeats) fills block k of per_token, mean
   * and cls, each buffer then holding num_layers blocks one after the
   * other (per_token [num_layers, batch, seq_len, hidden], mean and cls
   * [num_layers, rows, hidden]); `layer` is ignored. Logits are one. */
  int num_layers;
  const int *layers;
  /* Appended (fine-tuning): ESMT_INFER_HEAD's buffer. */
  float *head;
  /* Appended (0.2, issue #42): with ESMT_INFER_ATTENTION, the attention
   * probabilities of every layer and head, fp32, as fair-esm's
   * need_head_weights: for layer l = 0..L-1, then each protein p (row, or
   * segment when packed) in order, [heads, n_p, n_p] with n_p the
   * protein's positions (<cls> residues <eos>), query by key. Layer l's
   * block starts at l * heads * sum_p n_p^2 floats. A backend without the
   * attention_probs op (backend ABI 2.2) is ESMT_ERR_UNSUPPORTED. */
  float *attention;
} esmt_infer_request;

#define ESMT_INFER_REQUEST_INIT \
  { sizeof(esmt_infer_request), -1, ESMT_INFER_MEAN, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL }

ESMT_API esmt_status esmt_model_infer(esmt_model *model, const esmt_batch *batch,
                                      const esmt_infer_request *request);

/* Backward pass of the last forward: ADDS d(loss)/d(param) to the gradient
 * buffer (both paths into the tied embedding). */
ESMT_API esmt_status esmt_model_backward(esmt_model *model);

/* Set every gradient to zero. */
ESMT_API esmt_status esmt_model_zero_grad(esmt_model *model);

/* Activation recompute (activation checkpointing): with `enabled` 1 the
 * forward keeps only each layer's input (the residual stream) and backward
 * re-runs each layer's forward before differentiating it, so activation
 * memory no longer grows with the layer count (about one layer's forward
 * extra compute; results are bit-identical on a deterministic backend).
 * Takes effect at the next esmt_model_forward, which re-carves the
 * activation arena (esmt_plan_memory's "activations" figure with recompute
 * on). Off by default; the trainer sets it from offload.recompute. */
ESMT_API esmt_status esmt_model_set_recompute(esmt_model *model, int enabled);
ESMT_API esmt_status esmt_model_get_recompute(const esmt_model *model, int *enabled);

/* Bitwise repeatable gradients (1, the default) or a faster backward whose
 * results may differ in the last bits from run to run (0): the GPU
 * backends then sum the attention's dQ with fp32 atomics (FlashAttention-2's
 * schedule, ~5/7 of the deterministic backward's tile GEMMs). cpu.so has
 * one, deterministic, backward and ignores it. Takes effect at the next
 * esmt_model_backward; the trainer sets it from backend.deterministic. */
ESMT_API esmt_status esmt_model_set_deterministic(esmt_model *model, int deterministic);
ESMT_API esmt_status esmt_model_get_deterministic(const esmt_model *model, int *deterministic);

/* Training (1, the default) or evaluation (0) behaviour of
 * esmt_model_forward, as torch's train()/eval(): with 0 it applies no LoRA
 * dropout (esmt_model_config.lora_dropout), computing what esmt_model_infer
 * computes. The trainer's evaluation sets 0 for its passes. */
ESMT_API esmt_status esmt_model_set_training(esmt_model *model, int training);


typedef struct esmt_optimizer_config {
  uint32_t struct_size;
  esmt_optimizer_kind kind;   /* ESMT_OPTIMIZER_ADAMW; the model's (esmt_model_config.optimizer) */
  double beta1, beta2;        /* 0.9, 0.98 (ESM-2); Lion: 0.9, 0.99 */
  double eps;                 /* 1e-8 (AdamW only) */
  double weight_decay;        /* 0.01, decoupled; Lion: 0.1 */
  int decay_biases_and_norms; /* 1: decay every tensor (ESM-2); 0: skip biases/LN */
  /* Appended: a task head's (classifier.*) learning rate is the step's
   * times this; 1 (and a caller whose struct ends before it): the same. */
  double head_lr_scale;
  /* Appended: the first this many updates (esmt_model_optimizer_step's
   * step 1..N) step the task head alone, the encoder (or its LoRA
   * adapters) held as they are; from update N + 1 they train too, their
   * step count starting again at 1 so that their first update is
   * bias-corrected as a fresh one (a head warm-up, then full fine-tuning).
   * 0 (and a caller whose struct ends before it): none. */
  int64_t head_only_steps;
} esmt_optimizer_config;

#define ESMT_OPTIMIZER_CONFIG_INIT \
  { sizeof(esmt_optimizer_config), ESMT_OPTIMIZER_ADAMW, 0.9, 0.98, 1e-8, 0.01, 1, 1.0, 0 }

/* Same as assigning ESMT_OPTIMIZER_CONFIG_INIT with `kind` and its defaults. */
ESMT_API esmt_status esmt_optimizer_config_init(esmt_optimizer_kind kind,
                                                esmt_optimizer_config *cfg);

/* The GEMM ceiling MFU is quoted against for this model: its FFN-up GEMM
 * (`tokens` rows, clamped to 256..8192, x ffn x hidden) in its compute
 * precision, the best of `repeats` timed products after a warm-up. What
 * `bench` and ESMT_GEMM_CEILING_AUTO use. */
ESMT_API esmt_status esmt_model_gemm_ceiling(esmt_model *model, int64_t tokens, int repeats,
                                             double *gflops);

/* Model FLOPs of one training step (forward + backward) on `batch` rows of
 * `seq_len` tokens: 6 x matmul weights x tokens + 12 x L x d x T^2 x B for
 * attention (the usual MFU convention; token dropout, norms and softmax
 * not counted). */
ESMT_API esmt_status esmt_model_train_flops(const esmt_model_config *cfg, int batch, int seq_len,
                                            double *flops);

/* One optimizer update from the gradient buffer at learning rate `lr`,
 * the gradients multiplied by `grad_scale` first (clipping, loss-scale
 * removal; 1 = as computed); `step` is the 1-based count of updates applied
 * (AdamW's bias correction). Does not clear the gradients. cfg->kind must
 * be the model's (esmt_model_config.optimizer: its state was allocated for
 * it); another kind is refused. */
ESMT_API esmt_status esmt_model_optimizer_step(esmt_model *model, const esmt_optimizer_config *cfg,
                                               double lr, double grad_scale, int64_t step);

/* sqrt(sum of squared gradients) over all parameters, fp32 accumulation
 * in a fixed order. */
ESMT_API esmt_status esmt_model_grad_norm(esmt_model *model, double *norm);

/* Fold a LoRA model's adapters into the weights they adapt (peft's
 * merge_and_unload): W += (lora_alpha / lora_rank) B A for every adapter,
 * then B = 0, so that the model computes what it did (up to fp32
 * rounding) with neutral adapters, and its weights are the merged ones.
 * ESMT_ERR_STATE on a model without LoRA. */
ESMT_API esmt_status esmt_model_lora_merge(esmt_model *model);

/* The memory planner: what fits a device budget, per rank under ZeRO. */
#include "plan.h"

/* ------------------------------------------------------------------------ */
/* Hugging Face interop                                                      */
/* ------------------------------------------------------------------------ */

/* Write a directory transformers loads with EsmForMaskedLM.from_pretrained
 * (a model with a task head: EsmForSequenceClassification or
 * EsmForTokenClassification, config.json's num_labels, id2label and
 * problem_type set, no lm_head; a sequence head with mean pooling, which
 * transformers cannot compute, is refused; LoRA adapters merged into the
 * weights as peft's merge_and_unload) and EsmTokenizer.from_pretrained: config.json, model.safetensors (HF
 * names; also the keys transformers expects but ESM-2 does not use:
 * zero position embeddings, the rotary inv_freq buffers, the contact head
 * the model carries (imported or esmt_model_set_contact_head) or a zero one), vocab.txt, tokenizer_config.json, special_tokens_map.json.
 * and a marker, .esmtrain-export. Written into a temporary directory and
 * published only when complete: DIR must not exist or be empty (a
 * directory the user made keeps its mode), unless `overwrite` and DIR is
 * an earlier export (it carries the marker and only the files above):
 * then its files are replaced. Nothing esmtrain did not write is ever
 * replaced or removed. */
ESMT_API esmt_status esmt_model_export_hf(esmt_model *model, const char *dir, int overwrite);

/* A model with LoRA adapters as two directories: `base_dir`, what
 * esmt_model_export_hf writes but with the weights unmerged (the frozen
 * base and the task head), and `adapter_dir`, a PEFT adapter that
 * peft.PeftModel.from_pretrained(base, adapter_dir) loads on it:
 * adapter_config.json (peft 0.12's LoraConfig, target_modules as one
 * regular expression) and adapter_model.safetensors (peft's key names, the
 * task head as modules_to_save, and the base's fingerprint in the
 * metadata for esmt_model_import_peft). Both are complete before either is
 * published; the rules for existing directories are esmt_model_export_hf's.
 * A model without LoRA is ESMT_ERR_STATE. */
ESMT_API esmt_status esmt_model_export_peft(esmt_model *model, const char *base_dir,
                                            const char *adapter_dir, int overwrite);

/* Save the model on its own, for a training loop of one's own: weights,
 * optimizer state (esmt_model_optimizer_step's moments) and `step` into
 * `dir`, which must not exist or be an empty directory (it keeps its
 * mode); nothing is ever replaced. The files are a checkpoint's
 * (docs/formats.md): esmt_model_load, esmt_model_create_from_checkpoint,
 * esmt_trainer_init_from and `export` read them. */
ESMT_API esmt_status esmt_model_save(esmt_model *model, const char *dir, int64_t step);

/* Load what esmt_model_save (or a trainer checkpoint: "RUN_DIR",
 * ".../latest", a checkpoint directory) wrote into a model of the same
 * shape: the weights, and with `with_optimizer` the optimizer state (the
 * next esmt_model_optimizer_step continues it); *step (may be NULL)
 * receives the saved step. Everything is verified before the model is
 * touched: on failure the model is unchanged. */
ESMT_API esmt_status esmt_model_load(esmt_model *model, const char *dir, int with_optimizer,
                                     int64_t *step);

/* A model with the shape and weights of an esmtrain checkpoint ("RUN_DIR",
 * "RUN_DIR/checkpoints/latest" or a checkpoint directory). */
ESMT_API esmt_status esmt_model_create_from_checkpoint(esmt_context *ctx, const char *checkpoint,
                                                       esmt_model **out);

/* A model from a Hugging Face ESM-2 directory: config.json plus
 * model.safetensors, or model.safetensors.index.json with its shards;
 * F32/F16/BF16 tensors. Unused legacy keys are ignored, the tied decoder
 * may be present or absent, pretrained rotary inv_freq values are kept.
 * Pickle checkpoints (pytorch_model.bin, fair-esm .pt) are refused with a
 * pointer to tools/convert_to_safetensors.py. */
ESMT_API esmt_status esmt_model_import_hf(esmt_context *ctx, const char *dir, esmt_model **out);

/* A model from a transformers base directory (as esmt_model_import_hf)
 * and a PEFT LoRA adapter on it (adapter_config.json,
 * adapter_model.safetensors): lora_rank, lora_alpha and lora_dropout from
 * the config, lora_targets from the adapter's tensors, the adapters and the
 * task head (modules_to_save) from its file. Refused with the file and the
 * tensor or field named: an adapter on a module esmtrain does not adapt,
 * per-layer ranks or layers, DoRA, rsLoRA or trained biases, a tensor whose
 * shape is not the base's, and an adapter whose recorded base fingerprint
 * (written by esmt_model_export_peft) is not this base's. */
ESMT_API esmt_status esmt_model_import_peft(esmt_context *ctx, const char *base_dir,
                                            const char *adapter_dir, esmt_model **out);

/* Load a Hugging Face ESM-2 directory's weights into an existing model of
 * the same shape (a mismatch names the tensor); unchanged on failure. */
ESMT_API esmt_status esmt_model_load_hf(esmt_model *model, const char *dir);

/* ------------------------------------------------------------------------ */
/* Learning-rate schedules                                                   */
/* ------------------------------------------------------------------------ */

typedef enum esmt_schedule_kind {
  /* Linear warmup to the peak, linear decay to final_lr_fraction * peak
   * reached at decay_end_fraction * total_steps, then hold (ESM-2). */
  ESMT_SCHEDULE_ESM2 = 0,
  /* Linear warmup, then cosine from the peak to final_lr_fraction * peak
   * at total_steps. */
  ESMT_SCHEDULE_COSINE = 1,
  /* Linear warmup, then the peak. */
  ESMT_SCHEDULE_CONSTANT = 2
} esmt_schedule_kind;

typedef struct esmt_schedule {
  uint32_t struct_size;
  esmt_schedule_kind kind;
  double peak_lr;             /* 4e-4 */
  int64_t warmup_steps;       /* 2000; lr = peak * step / warmup while step < warmup */
  int64_t total_steps;        /* the run's length in updates (decay shapes need it);
                               * 0: the trainer's max_steps */
  double final_lr_fraction;   /* 0.1 */
  double decay_end_fraction;  /* 0.9 (ESM-2 only) */
} esmt_schedule;

#define ESMT_SCHEDULE_INIT \
  { sizeof(esmt_schedule), ESMT_SCHEDULE_ESM2, 4e-4, 2000, 0, 0.1, 0.9 }

/* Learning rate of update `step` (1-based). */
ESMT_API esmt_status esmt_schedule_lr(const esmt_schedule *schedule, int64_t step, double *lr);

/* The trainer: batch sources, options, the training loop, checkpoints,
 * metrics, data parallelism. */
#include "trainer.h"

/* Protein data: alphabet, FASTA ingest into shards, the MLM loader, the
 * sequence reader. */
#include "data.h"

/* Configuration: typed settings under dotted keys, from YAML and overrides. */
#include "config.h"

/* Inference from protein strings: tokens, batches, embeddings of proteins
 * of any length, pseudo-log-likelihood and variant scores. */
#include "infer.h"

/* Fine-tuning: labelled tables, their splits as batch sources, task metrics. */
#include "finetune.h"

#ifdef __cplusplus
}
#endif

#endif /* ESMTRAIN_ESMTRAIN_H */
