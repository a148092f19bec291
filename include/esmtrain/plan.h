/* SPDX-License-Identifier: MIT */
/* libesmtrain public API, part of esmtrain.h: the memory planner (device
 * memory by tensor class, the policy and micro-batch that fit a budget,
 * ZeRO stages per rank, a model created from a plan).
 * Include <esmtrain/esmtrain.h>, which includes this file where it belongs. */
#ifndef ESMTRAIN_PLAN_H
#define ESMTRAIN_PLAN_H

#ifndef ESMTRAIN_ESMTRAIN_H
#error "include <esmtrain/esmtrain.h>, not this file"
#endif

/* ------------------------------------------------------------------------ */
/* Memory planner                                                            */
/* ------------------------------------------------------------------------ */

/* Device memory by tensor class. */
typedef enum esmt_mem_class {
  ESMT_MEM_COMPUTE_WEIGHTS = 0, /* fp16/bf16 copies the kernels read */
  ESMT_MEM_MASTER_WEIGHTS = 1,  /* fp32 */
  ESMT_MEM_GRADIENTS = 2,
  ESMT_MEM_MOMENTS = 3,         /* the optimizer's state: AdamW m and v, Lion m */
  ESMT_MEM_ACTIVATIONS = 4,     /* kept for backward, plus backward scratch */
  ESMT_MEM_WORKSPACE = 5,       /* GEMM workspace, reductions, tables */
  ESMT_MEM_RUNTIME = 6,         /* the runtime's own use (CUDA context) */
  ESMT_MEM_CLASS_COUNT = 7
} esmt_mem_class;

typedef struct esmt_plan_request {
  uint32_t struct_size;
  /* The shape to plan (precision not read). A pointer, not a copy: a
   * versioned struct inside another by value would move the outer one's
   * later fields whenever it grows (docs/ABI.md). */
  const esmt_model_config *model;
  int micro_batch;              /* rows; 0 = the largest that fits (at most 256) */
  int seq_len;                  /* tokens per row, cls/eos included */
  esmt_precision precision;     /* FP32, FP16 or BF16 (not AUTO); model.precision is not read */
  uint64_t device_budget;       /* bytes the job may use; 0 = unlimited */
  int offload_optimizer;        /* -1 auto, 0 off, 1 on */
  int recompute;                /* -1 auto, 0 off, 1 on */
  uint64_t runtime_overhead;    /* bytes the runtime takes besides allocations */
  /* Appended (0.2, issue #36): what else streams from host memory, an
   * esmt_stream_level, or -1 auto (the cheapest that fits). A level above
   * NONE needs offload_optimizer on (or auto). A caller whose struct ends
   * before it gets ESMT_STREAM_NONE. */
  int stream;
  /* Appended (0.2, issue #36): host memory the offloaded state may take, in
   * bytes (0: not limited). A policy whose host_pinned exceeds it does not
   * fit. The trainer passes what the machine has available (MemAvailable,
   * ulimit, cgroup); `plan --host-mem`. */
  uint64_t host_budget;
  /* Appended (0.2, issue #36): measured rates that time the plan (0:
   * unknown). With device_flops (the GEMM ceiling in FLOP/s, `bench`
   * prints it) and, for offload, link_bandwidth (bytes/s of the slower
   * direction, esmt_context_copy_bandwidth) the plan carries its expected
   * time, and an automatic policy and micro-batch is the fastest that fits
   * rather than the first: transfers cost only what the compute beside
   * them does not hide. host_bandwidth (bytes/s of host memory) adds the
   * host's gradient sums and optimizer pass; tokens_per_update (0: one
   * micro-batch) the number of micro-batches an update takes. */
  double device_flops;
  double link_bandwidth;
  double host_bandwidth;
  uint64_t tokens_per_update;
  /* Appended (0.2, issue #38): the data-parallel ranks (0 or 1: one
   * process) and the ZeRO stage (dist.zero: 0, 1, 2 or 3) they run; the plan
   * is one rank's. Stages 1 and 2 hold the optimizer state of the rank's
   * shard only (the largest: ceil(P / 64 / world) units of 64); stage 2
   * holds fp32 gradients for that shard, two layers' slots and the
   * embedding's and head's (stage 1 the whole buffer), and in fp16/bf16
   * the fp32 master of the shard; stage 3 also the compute weights of the
   * shard, the embedding's and head's whole and two layers' gather slots.
   * zero -1 (auto) plans the lowest stage that fits (the advice names it).
   * At stages 1 and 2 the optimizer may be offloaded (offload_optimizer on
   * or auto): each rank's host holds the fp32 master, the moments and the
   * fp32 gradients of its shard (host_pinned is one rank's); stage 3 and
   * the streamed levels do not combine with ZeRO (auto plans them off).
   * A caller whose struct ends before them plans one process. */
  int world_size;
  int zero;
  /* Appended (0.2, issue #38): how many of the ranks share one host's
   * memory (0: all world_size of them, one machine). host_budget is that
   * host's: a policy fits when ranks_per_host x host_pinned is within it. */
  int ranks_per_host;
} esmt_plan_request;

/* Memory levels beyond optimizer offload: the parameter memory keeps only
 * the running layer's part on the device. GRADIENTS: each layer's
 * gradients go to host memory as backward produces them (accumulated there
 * in fp32); WEIGHTS: that, and each layer's compute weights come from host
 * memory as it runs (forward, recompute, backward). The embedding and the
 * LM head stay on the device. */
typedef enum esmt_stream_level {
  ESMT_STREAM_NONE = 0,
  ESMT_STREAM_GRADIENTS = 1,
  ESMT_STREAM_WEIGHTS = 2
} esmt_stream_level;

#define ESMT_PLAN_REQUEST_INIT \
  { sizeof(esmt_plan_request), NULL, 0, 512, ESMT_PRECISION_FP32, 0, -1, -1, 0, ESMT_STREAM_NONE, \
    0, 0, 0, 0, 0, 1, 0, 0 }

typedef struct esmt_plan {
  uint32_t struct_size;
  int fits;                     /* 1 when the plan fits the budget */
  int micro_batch;
  int offload_optimizer;        /* master weights, moments, fp32 grads on the host */
  int recompute;                /* per-layer activation recomputation */
  uint64_t device[ESMT_MEM_CLASS_COUNT];
  uint64_t device_total;
  uint64_t host_pinned;         /* page-locked host memory the plan needs */
  uint64_t parameters;
  char advice[512];             /* why it does not fit / what was chosen */
  /* Appended (0.2, issue #36); filled when struct_size covers them. */
  int stream;                   /* the esmt_stream_level chosen */
  uint64_t stream_bytes;        /* bytes over the host link per micro-batch for it: weights up
                                 * for forward and backward, gradients down (0: none) */
  /* Appended (0.2, issue #36): the expected time of an update when the
   * request carried the rates (else 0): device compute (recompute
   * included), the host link's busy time, and the seconds transfers and
   * host passes add to the compute (exposed / compute is the overhead). */
  int micro_batches;            /* per update (tokens_per_update) */
  double compute_seconds;
  double link_seconds;
  double exposed_seconds;
  /* Appended (0.2, issue #38): with world_size > 1, the gradient and
   * weight bytes one rank sends per update on a ring at the request's ZeRO
   * stage (the update's micro_batches shared by the ranks when timed,
   * else one per rank). */
  uint64_t comm_bytes;
  /* Appended (0.2, issue #38): with world_size > 1, the size of the
   * buffers each kind of collective carries per update at the request's
   * ZeRO stage (the same micro-batches as comm_bytes): the gradients
   * all-reduced (stage 0), reduce-scattered (stage 1 once, stage 2 once
   * per micro-batch) and the updated weights all-gathered (stages 1, 2). */
  uint64_t allreduced_bytes;
  uint64_t reduce_scattered_bytes;
  uint64_t allgathered_bytes;
} esmt_plan;

#define ESMT_PLAN_INIT \
  { sizeof(esmt_plan), 0, 0, 0, 0, {0}, 0, 0, 0, {0}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Plan device memory for training: the exact bytes per class for the
 * requested policy, or, for "auto" fields, the cheapest policy (none, then
 * recompute, then optimizer offload, then both; then gradients streamed,
 * without and with recompute; then weights streamed likewise) and
 * micro-batch that fit; with the request's rates, the fastest of the
 * policies from the first that fits on (each at its largest micro-batch,
 * or the requested one), by expected time per token.
 * When nothing fits returns ESMT_ERR_OUT_OF_MEMORY with advice in the
 * message and in plan->advice (plan filled with the smallest attempt). */
ESMT_API esmt_status esmt_plan_memory(const esmt_plan_request *request, esmt_plan *plan);

/* Appended (issue #42): the buffers esmt_model_infer takes for
 * ESMT_INFER_ATTENTION on `batch` rows of `seq_len` positions: device, one
 * layer's [batch, heads, seq_len, seq_len] fp32 softmax; host, its copy
 * plus the maps returned (every layer's, the caller's buffer at most). */
ESMT_API esmt_status esmt_plan_attention_maps(const esmt_model_config *config, int batch,
                                              int seq_len, uint64_t *device_bytes,
                                              uint64_t *host_bytes);

/* Appended (0.2, issue #36): the memory policy a model of one's own is
 * created with, as esmt_plan_memory chose it (its offload_optimizer,
 * recompute and stream fields) or as the caller forces it. */
typedef struct esmt_memory_policy {
  uint32_t struct_size;
  int offload_optimizer;        /* 1: master weights, moments and fp32 gradients in host memory */
  int recompute;                /* 1: per-layer activation recomputation */
  int stream;                   /* an esmt_stream_level; above NONE needs offload_optimizer */
  uint64_t pinned_limit;        /* page-locked host bytes at most (0: no cap); the rest pageable */
  uint64_t device_memory_limit; /* the backend's allocation budget; 0 = the context's */
} esmt_memory_policy;

#define ESMT_MEMORY_POLICY_INIT { sizeof(esmt_memory_policy), 0, 0, ESMT_STREAM_NONE, 0, 0 }

/* esmt_model_create under a memory policy (NULL: the plain model). The
 * model trains the same whatever the policy: a 1-micro-batch update is
 * bit-identical, and its checkpoints are the same files. */
ESMT_API esmt_status esmt_model_create_with_memory(esmt_context *ctx, const esmt_model_config *cfg,
                                                   uint64_t seed, const esmt_memory_policy *policy,
                                                   esmt_model **out);

/* Name of a memory class ("activations"). */
ESMT_API const char *esmt_mem_class_name(esmt_mem_class cls);

#endif /* ESMTRAIN_PLAN_H */
