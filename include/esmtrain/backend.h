/* SPDX-License-Identifier: MIT */
/*
 * esmtrain backend plugin ABI.
 *
 * A backend is a shared object exporting two C symbols:
 *
 *   const esmtb_backend *esmt_backend_init(const esmtb_host *host);
 *   int              esmt_backend_score(const esmtb_job *job);
 *
 * `esmt_backend_init` returns a static, versioned description of the
 * backend (or NULL, having called host->set_error) whose `group` call hands
 * out its ops grouped by concern: device & memory & streams, compute,
 * optimizers, communication. `esmt_backend_score`
 * says how well the backend suits this machine and job: 0 = cannot run
 * here, higher = better; the registry picks the highest. Neither may abort
 * or exit; a GPU backend on a machine without a driver returns score 0 and
 * reports the reason through probe().
 *
 * Memory model. A backend hands out opaque "device pointers" (void *). The
 * core does byte arithmetic on them (base + offset) but never dereferences
 * them unless the backend's caps have ESMTB_CAP_HOST_ADDRESSABLE. Ordering is by
 * streams: every op takes an esmtb_stream; ops on one stream run in order;
 * events order work across streams. A NULL stream is the device's default
 * stream.
 *
 * Layouts. Matrices are row-major. Activations are [rows, cols] with
 * rows = tokens (B*T). Parameters, gradients and optimizer moments are fp32
 * in flat buffers; activations are in the dtype the op's args name. In
 * F16/BF16 training the core also keeps a half-precision copy of the
 * parameters (same layout) that gemm and embed read; LayerNorm w/b and all
 * gradients stay fp32.
 *
 * ABI policy (docs/ABI.md): a minor version may only append fields to the
 * END of esmtb_backend, of a group and of args structs (each carries
 * struct_size), add new optional ops (NULL = not implemented) and add new
 * groups. Anything else - reordering, removing, changing a signature or
 * meaning - is a new group version or a major version. The core refuses a
 * backend whose abi_major differs from its own, or whose esmtb_backend or
 * required groups are smaller than the minimum it needs.
 */
#ifndef ESMTRAIN_BACKEND_H
#define ESMTRAIN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ESMTB_ABI_MAJOR 2
#define ESMTB_ABI_MINOR 3

#if defined(__GNUC__)
#  define ESMTB_EXPORT __attribute__((visibility("default")))
#else
#  define ESMTB_EXPORT
#endif

/* Status codes are the public esmt_status values (0 = OK); a backend
 * returns them by these names (the core checks they match esmt_status). */
typedef int esmtb_status;

enum {
  ESMTB_OK = 0,
  ESMTB_ERR_INVALID_ARGUMENT = 1, /* a bad op argument: a bug in the caller */
  ESMTB_ERR_OUT_OF_MEMORY = 2,    /* device or pinned memory exhausted */
  ESMTB_ERR_IO = 3,
  ESMTB_ERR_FORMAT = 4,
  ESMTB_ERR_NO_BACKEND = 5,
  ESMTB_ERR_BACKEND = 6,          /* the device/driver/library failed */
  ESMTB_ERR_ABI = 7,
  ESMTB_ERR_UNSUPPORTED = 8,      /* a valid request this backend cannot do */
  ESMTB_ERR_CANCELLED = 9,
  ESMTB_ERR_NUMERIC = 10,
  ESMTB_ERR_CONFIG = 11,
  ESMTB_ERR_STATE = 12,
  ESMTB_ERR_INTERNAL = 13
};

/* Probe scores of the backends esmtrain ships: the highest score among
 * the available backends wins, 0 means "cannot run here". One table so
 * that a third-party backend can choose its place (docs/ABI.md). */
enum {
  ESMTB_SCORE_NCCL_DP_ONE_GPU = 1,      /* nccl_dp with one GPU: only when forced by name */
  ESMTB_SCORE_CPU = 10,                 /* cpu.so: always runnable, lowest priority */
  ESMTB_SCORE_TURING_ON_SM80 = 40,      /* turing_fp16 where ampere_bf16 can run */
  ESMTB_SCORE_TURING = 60,              /* turing_fp16 on sm_75 */
  ESMTB_SCORE_AMPERE = 100,             /* ampere_bf16 on sm_80+ */
  ESMTB_SCORE_NCCL_DP_MULTI_GPU = 200   /* nccl_dp with two or more GPUs */
};

typedef enum esmtb_dtype {
  ESMTB_F32 = 0,
  ESMTB_F16 = 1,
  ESMTB_BF16 = 2,
  ESMTB_I32 = 3,
  ESMTB_U8 = 4
} esmtb_dtype;

typedef enum esmtb_mem_kind {
  ESMTB_MEM_DEVICE = 0,      /* memory the ops compute on */
  ESMTB_MEM_PINNED_HOST = 1  /* page-locked host memory for fast async copies */
} esmtb_mem_kind;

typedef enum esmtb_copy_kind {
  ESMTB_COPY_H2D = 0,
  ESMTB_COPY_D2H = 1,
  ESMTB_COPY_D2D = 2
} esmtb_copy_kind;

typedef enum esmtb_caps {
  ESMTB_CAP_HOST_ADDRESSABLE = 1u << 0, /* device pointers are host pointers */
  ESMTB_CAP_F32 = 1u << 1,
  ESMTB_CAP_F16 = 1u << 2,
  ESMTB_CAP_BF16 = 1u << 3,
  ESMTB_CAP_MULTI_DEVICE = 1u << 4,     /* has the "comm" group (allreduce, comm_*) */
  ESMTB_CAP_VARLEN = 1u << 5            /* ABI 1.3: embed and attention take packed segments */
} esmtb_caps;

typedef struct esmtb_device esmtb_device; /* one opened device (backend-defined) */
typedef struct esmtb_stream esmtb_stream;
typedef struct esmtb_event esmtb_event;

/* Services the core offers a backend. Valid for the process lifetime. */
typedef struct esmtb_host {
  uint32_t struct_size;
  uint32_t abi_major, abi_minor;  /* of the core */
  /* Record the error message for the calling thread (printf format). */
  void (*set_error)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
  /* Log one line at an esmt_log_level. */
  void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
} esmtb_host;

/* The job a backend is scored for; zeros mean unknown. */
typedef struct esmtb_job {
  uint32_t struct_size;
  uint64_t param_count;
  int seq_len;
  int micro_batch;
} esmtb_job;

#define ESMTB_MAX_DEVICES 16

typedef struct esmtb_device_desc {
  char name[128];
  int cc_major, cc_minor;
  uint64_t total_bytes, free_bytes;
} esmtb_device_desc;

typedef struct esmtb_probe {
  uint32_t struct_size;
  int available;             /* 1 when it can run here */
  int score;                 /* 0 when unavailable */
  char reason[256];          /* why not available, or a note */
  int device_count;
  esmtb_device_desc devices[ESMTB_MAX_DEVICES];
} esmtb_probe;

typedef struct esmtb_open_options {
  uint32_t struct_size;
  int device_index;          /* which device (GPU ordinal); 0 for cpu */
  int num_threads;           /* host threads the backend may use; 0 = all */
  uint64_t device_memory_limit; /* bytes; 0 = no limit */
} esmtb_open_options;

/* ------------------------------------------------------------------------ */
/* Op arguments. Every struct starts with struct_size (set by the core).    */
/* ------------------------------------------------------------------------ */

/* C[m,n] = alpha * op(A)[m,k] . op(B)[k,n] + beta * C (+ bias[n]) then the
 * epilogue. op(X) = X or X^T per trans_*. Row-major with leading dims.
 * A linear layer y = x W^T + b is: A = x [m,k], B = W [n,k], trans_b = 1.
 * With epilogue GELU and `pre` non-NULL, the pre-activation is stored in
 * `pre` (same shape/ld as C) for the backward pass. The bias is only valid
 * with beta == 0. a/b/c and bias share `dtype` (in F16/BF16 training the
 * core passes weights and biases from its half-precision copy, activations
 * in the same dtype); accumulation is fp32. */
typedef enum esmtb_epilogue { ESMTB_EPI_NONE = 0, ESMTB_EPI_GELU = 1 } esmtb_epilogue;

typedef struct esmtb_gemm_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  int trans_a, trans_b;
  int m, n, k;
  float alpha, beta;
  const void *a; int lda;
  const void *b; int ldb;
  void *c; int ldc;
  const void *bias;          /* [n] or NULL */
  esmtb_epilogue epilogue;
  void *pre;                 /* GELU pre-activation out, or NULL */
  /* ABI 1.1: when 1, c is fp32 while a and b are `dtype` (mixed precision:
   * weight gradients of F16/BF16 activations accumulate, beta = 1, into
   * the fp32 gradient buffer). Only with bias == NULL and no epilogue. A
   * backend that cannot do it fails with a message. */
  int c_f32;
} esmtb_gemm_args;

/* Packed rows (ABI 1.3). Several sequences share one row of T tokens:
 * segment s covers the flattened token indices
 *   [start[s], start[s] + len[s])      (start into the B*T rows)
 * which lie inside one row; segments are ascending and disjoint; tokens in
 * no segment are padding. nseg == 0 (or a struct_size that stops before
 * the field) means the right-padded layout: one sequence per row, length
 * seq_len[b]. Backends without ESMTB_CAP_VARLEN never see nseg > 0. */
typedef struct esmtb_segments {
  int nseg;                  /* number of sequences in the micro-batch */
  int max_len;               /* longest len[s] (grid sizing) */
  const int32_t *start;      /* device [nseg] */
  const int32_t *len;        /* device [nseg], >= 1 */
} esmtb_segments;

/* Embedding with ESM-2 token dropout (always on):
 *   out[r] = E[tok[r]] * s_b, 0 where tok == mask_id or tok == pad_id,
 *   s_b = (1 - mask_ratio_train) / (1 - m_b / n_b), n_b = non-pad tokens of
 *   row b, m_b = mask tokens of row b. `row_scale` [B] receives s_b.
 * Backward: dE[tok[r]] += dout[r] * s_b for non-mask, non-pad r. */
typedef struct esmtb_embed_args {
  uint32_t struct_size;
  esmtb_dtype dtype;         /* of out/dout */
  int B, T, d;
  const int32_t *tokens;     /* device, [B*T] */
  const void *E;             /* device, [V,d] in `dtype` */
  void *out;                 /* [B*T,d] */
  float *row_scale;          /* device [B] */
  int mask_id, pad_id;
  float mask_ratio_train;    /* 0.12 = 0.15 * 0.8 for ESM-2 */
  /* backward only */
  const void *dout;          /* [B*T,d] */
  float *dE;                 /* [V,d] fp32, accumulated */
  /* ABI 1.3, packed rows (see esmtb_segments; only with ESMTB_CAP_VARLEN).
   * With segs.nseg > 0 the token-dropout scale is per segment: n = seg_len,
   * m = mask tokens in the segment, and `row_scale` is [nseg]. */
  esmtb_segments segs;
} esmtb_embed_args;

/* LayerNorm over the last dim d of [N,d], eps, biased variance; fp32 math.
 * Forward saves mean/rstd [N] (fp32). Backward: dx (+)= , dw += , db += .
 * With accumulate_dx, dx += grad (residual stream), else dx = grad. */
typedef struct esmtb_layernorm_args {
  uint32_t struct_size;
  esmtb_dtype dtype;         /* of x/out/dout/dx */
  int N, d;
  float eps;
  const void *x;
  const float *w, *b;        /* [d] fp32 */
  void *out;
  float *mean, *rstd;        /* [N] */
  /* backward only */
  const void *dout;
  void *dx;
  int accumulate_dx;
  float *dw, *db;            /* [d] fp32, accumulated */
} esmtb_layernorm_args;

/* y = a + b elementwise over n values (y may alias a or b). */
typedef struct esmtb_add_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  size_t n;
  const void *a, *b;
  void *y;
} esmtb_add_args;

/* dpre = dout * gelu'(pre), elementwise over n (exact erf GELU); dpre may
 * alias dout. */
typedef struct esmtb_gelu_backward_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  size_t n;
  const void *pre, *dout;
  void *dpre;
} esmtb_gelu_backward_args;

/* db[j] += sum_r dy[r, j] over rows (bias gradient, fp32 accumulate). */
typedef struct esmtb_bias_grad_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  int rows, cols;
  const void *dy;
  float *db;
} esmtb_bias_grad_args;

/* Multi-head self-attention core (no projections) for right-padded rows:
 *   qkv [B*T, 3*H*hd]: per token q heads, then k heads, then v heads.
 *   q is scaled by `scale` BEFORE rotary; rotary (split-half, position =
 *   index in the row) applies to q and k from fp32 tables cos/sin
 *   [T, hd/2]; keys j >= seq_len[b] are masked; softmax in fp32;
 *   out [B*T, H*hd] = concat over heads of P.v. Query rows t >= seq_len[b]
 *   are padding: out there is 0 and they get no gradient.
 *   lse [B*H*T] (fp32) receives each row's log-sum-exp for backward.
 * Never materialises B*H*T*T. Backward writes dqkv (same layout as qkv). */
typedef struct esmtb_attention_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  int B, T, H, hd;
  float scale;
  const int32_t *seq_len;    /* device [B], 1..T */
  const float *rope_cos, *rope_sin; /* device [T, hd/2] */
  const void *qkv;
  void *out;
  float *lse;
  /* backward only */
  const void *dout;
  void *dqkv;
  /* ABI 1.3, packed rows (only with ESMTB_CAP_VARLEN): with segs.nseg > 0,
   * seq_len is ignored; a query attends only to keys of its own segment;
   * the rotary position of a token is its index minus its segment's start
   * (positions restart per sequence); padding tokens (in no segment) get
   * out = 0, dqkv = 0 and lse = 0. lse keeps its [B*H*T] layout. */
  esmtb_segments segs;
  /* ABI 1.6, backward only: 1 allows a faster backward whose results may
   * differ in the last bits from run to run (the GPU backends' atomic dQ
   * accumulation); 0 (the default) asks for bitwise repeatable results. A
   * backend without such a variant ignores it. */
  int nondeterministic;
  /* ABI 2.2, attention_probs only: fp32 [B, H, T, T], probs[b][h][i][j] =
   * the softmax probability with which query i of row b attends key j of
   * that row (rotary and scale as the forward applies them, fp32 softmax).
   * Every entry the forward would not compute is 0: keys j >= seq_len[b]
   * and query rows i >= seq_len[b], or, packed, every pair not inside one
   * segment. out, lse and the gradient fields are not used. */
  float *probs;
} esmtb_attention_args;

/* Fused softmax cross-entropy over [N, V] logits with int32 labels
 * (label < 0 = ignored). loss_sum (device fp32 scalar) += sum of
 * -log softmax at labelled rows; dlogits = (softmax - onehot) * grad_scale
 * on labelled rows and 0 elsewhere (dlogits may alias logits). */
typedef struct esmtb_xent_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  int N, V;
  const void *logits;
  const int32_t *labels;
  float *loss_sum;
  void *dlogits;             /* NULL: forward only */
  float grad_scale;          /* usually 1 / (selected count) */
} esmtb_xent_args;

/* One contiguous run of a flat parameter buffer with its own decay. */
typedef struct esmtb_segment {
  size_t offset, count;      /* in elements */
  float weight_decay;
} esmtb_segment;

/* AdamW (decoupled decay) over segments of flat fp32 buffers:
 *   g = grads * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *   p -= lr * (wd * p + (m / bc1) / (sqrt(v / bc2) + eps))
 * with bc1 = 1 - b1^step, bc2 = 1 - b2^step. If params_lowp is non-NULL,
 * the updated weights are also written there in `lowp_dtype`. */
typedef struct esmtb_adamw_args {
  uint32_t struct_size;
  int n_segments;
  const esmtb_segment *segments; /* host array */
  float *params;
  const float *grads;
  float *m, *v;
  float lr, beta1, beta2, eps;
  int64_t step;              /* 1-based */
  float grad_scale;
  void *params_lowp;
  esmtb_dtype lowp_dtype;
} esmtb_adamw_args;

/* Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms")
 * over segments of flat fp32 buffers, decoupled decay as in AdamW:
 *   g = grads * grad_scale; u = sign(b1 m + (1-b1) g)  (sign(0) = 0);
 *   p -= lr * (wd * p + u); m = b2 m + (1-b2) g
 * One moment (half of AdamW's optimizer state). If params_lowp is non-NULL,
 * the updated weights are also written there in `lowp_dtype`. ABI 1.4. */
typedef struct esmtb_lion_args {
  uint32_t struct_size;
  int n_segments;
  const esmtb_segment *segments; /* host array */
  float *params;
  const float *grads;
  float *m;
  float lr, beta1, beta2;
  float grad_scale;
  void *params_lowp;
  esmtb_dtype lowp_dtype;
} esmtb_lion_args;

/* *out (device fp32 scalar) += sum of x[i]^2 over n fp32 values, with the
 * partial sums reduced in a fixed order (deterministic). */
typedef struct esmtb_sumsq_args {
  uint32_t struct_size;
  size_t n;
  const float *x;
  float *out;
} esmtb_sumsq_args;

/* x[i] *= factor (fp32, n values). */
typedef struct esmtb_scale_args {
  uint32_t struct_size;
  size_t n;
  float *x;
  float factor;
} esmtb_scale_args;

/* ABI 2.3. Inverted dropout with a mask drawn where the data is, by the
 * counter-based generator of esmtrain/philox.h (keep(i) =
 * esmt_dropout_keep(seed, stream, i, threshold)), over n values of dtype:
 *   y[i] = (accumulate ? y[i] : 0) + (keep(i) ? scale * x[i] : 0)
 * scale is 1 / (1 - p) for threshold esmt_dropout_threshold(p). y may
 * alias x. The same (seed, stream) gives the same mask on every backend, so
 * a backward pass redraws the forward's instead of storing it. */
typedef struct esmtb_dropout_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  size_t n;
  const void *x;
  void *y;
  uint64_t seed, stream;
  uint32_t threshold;
  float scale;
  int accumulate;
} esmtb_dropout_args;

/* dst = src converted between dtypes (e.g. fp32 master -> fp16 copy). */
typedef struct esmtb_convert_args {
  uint32_t struct_size;
  size_t n;
  const void *src; esmtb_dtype src_dtype;
  void *dst; esmtb_dtype dst_dtype;
} esmtb_convert_args;

/* Sum `buf` (n values of dtype) across all ranks of the backend's
 * communicator, in place. Only ESMTB_CAP_MULTI_DEVICE backends. */
typedef struct esmtb_allreduce_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  size_t n;
  void *buf;
} esmtb_allreduce_args;

/* ABI 1.3 (reduce_scatter, allgather): the two halves of allreduce over
 * uneven shards, for ZeRO-1. `offsets` (host memory, world + 1 values,
 * offsets[0] = 0, offsets[world] = n, non-decreasing) gives rank r the
 * elements [offsets[r], offsets[r+1]) of buf. reduce_scatter: afterwards
 * rank r's part of buf holds the sum over the ranks (the rest of buf is
 * unspecified); allgather: every rank's part is copied into every rank's
 * buf. In place, queued on the stream like allreduce; the offsets are read
 * before the call returns. */
typedef struct esmtb_shard_args {
  uint32_t struct_size;
  esmtb_dtype dtype;
  size_t n;
  void *buf;
  int world;
  const size_t *offsets;
} esmtb_shard_args;

/* ABI 1.2: join this device to a communicator of `world` ranks. Every rank
 * passes the bytes that rank 0's comm_unique_id produced (the core carries
 * them over its host communicator). */
typedef struct esmtb_comm_init_args {
  uint32_t struct_size;
  int rank, world;
  const void *unique_id;
  size_t id_bytes;
  /* A collective or a wait on one that makes no progress for this long
   * fails (and tears the communicator down) instead of hanging on a dead
   * peer; 0 = wait forever. */
  double timeout_s;
  /* Optional (NULL: none). While it waits on the communicator's work the
   * backend calls this every few milliseconds (from the waiting thread)
   * until comm_release: non-NULL is why a peer is known to have failed (the
   * core learned it on its own connections, e.g. a killed process); give up
   * at once, as on a timeout, with that reason in the message. */
  const char *(*peer_failed)(void *user);
  void *peer_failed_user;
} esmtb_comm_init_args;

#define ESMTB_COMM_ID_MAX 1024 /* the largest unique id the core carries */

/* ------------------------------------------------------------------------ */
/* The backend and its groups of ops                                        */
/* ------------------------------------------------------------------------ */

/* ABI 2 groups the ops by concern. Each group is a table of its own that
 * starts with {struct_size, version}: a group grows by appending fields
 * (the core reads a field only when struct_size covers it), and `version`
 * changes only when a group's existing fields change. The backend hands a
 * group out through esmtb_backend.group(name, version): NULL means "not
 * provided" (an optional group, or a version it does not speak), which the
 * core treats as every op of that group being NULL. */
#define ESMTB_GROUP_DEVICE "device"       /* required: esmtb_device_ops */
#define ESMTB_GROUP_COMPUTE "compute"     /* required: esmtb_compute_ops */
#define ESMTB_GROUP_OPTIMIZER "optimizer" /* optional: esmtb_optimizer_ops */
#define ESMTB_GROUP_COMM "comm"           /* optional: esmtb_comm_ops */

#define ESMTB_DEVICE_OPS_VERSION 1
#define ESMTB_COMPUTE_OPS_VERSION 1
#define ESMTB_OPTIMIZER_OPS_VERSION 1
#define ESMTB_COMM_OPS_VERSION 1

/* Devices, memory, streams and events. */
typedef struct esmtb_device_ops {
  uint32_t struct_size;      /* sizeof(esmtb_device_ops) the backend was built with */
  uint32_t version;          /* ESMTB_DEVICE_OPS_VERSION */

  esmtb_status (*open)(const esmtb_open_options *opts, esmtb_device **out);
  void (*close)(esmtb_device *dev);
  esmtb_status (*mem_info)(esmtb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);
  /* Optional (NULL): the device's PCI bus id ("0000:3B:00.0",
   * NUL-terminated in `cap` bytes), by which the core finds it in NVML for
   * the per-step device utilisation (CUDA ordinals and NVML indices differ
   * under CUDA_VISIBLE_DEVICES). Without it the core logs the memory
   * figures of mem_info alone. */
  esmtb_status (*pci_bus_id)(esmtb_device *dev, char *buf, size_t cap);

  esmtb_status (*alloc)(esmtb_device *dev, esmtb_mem_kind kind, size_t bytes, void **out);
  void (*free)(esmtb_device *dev, esmtb_mem_kind kind, void *ptr);
  esmtb_status (*memset_async)(esmtb_device *dev, void *dst, int value, size_t bytes,
                               esmtb_stream *s);
  /* A host source that is not ESMTB_MEM_PINNED_HOST memory has been read
   * when copy_async returns (CUDA stages pageable memory), so the caller may
   * reuse it at once; pinned memory is read in stream order. More
   * generally, no op keeps a pointer into the caller's host arguments
   * (segment tables and the like) after it returns. */
  esmtb_status (*copy_async)(esmtb_device *dev, void *dst, const void *src, size_t bytes,
                             esmtb_copy_kind kind, esmtb_stream *s);

  esmtb_status (*stream_create)(esmtb_device *dev, esmtb_stream **out);
  void (*stream_destroy)(esmtb_device *dev, esmtb_stream *s);
  esmtb_status (*stream_sync)(esmtb_device *dev, esmtb_stream *s);
  esmtb_status (*event_create)(esmtb_device *dev, esmtb_event **out);
  void (*event_destroy)(esmtb_device *dev, esmtb_event *e);
  esmtb_status (*event_record)(esmtb_device *dev, esmtb_event *e, esmtb_stream *s);
  esmtb_status (*stream_wait_event)(esmtb_device *dev, esmtb_stream *s, esmtb_event *e);
  esmtb_status (*event_sync)(esmtb_device *dev, esmtb_event *e);

  /* Appended in 2.1, optional (NULL: the backend cannot time its work):
   * an event whose elapsed time can be read (event_create's events may
   * skip timing, which costs a GPU a little on every record), and the
   * time on the device between two such events once both have completed (after
   * event_sync of the later one), in seconds. The core uses them only for
   * the per-op timeline of ESMT_PROFILE=events. */
  esmtb_status (*timing_event_create)(esmtb_device *dev, esmtb_event **out);
  esmtb_status (*event_elapsed)(esmtb_device *dev, esmtb_event *start, esmtb_event *end,
                                double *seconds);
} esmtb_device_ops;

/* The ESM-2 ops (each NULL = not implemented by this backend). */
typedef struct esmtb_compute_ops {
  uint32_t struct_size;
  uint32_t version;          /* ESMTB_COMPUTE_OPS_VERSION */

  esmtb_status (*gemm)(esmtb_device *dev, const esmtb_gemm_args *a, esmtb_stream *s);
  esmtb_status (*embed_forward)(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s);
  esmtb_status (*embed_backward)(esmtb_device *dev, const esmtb_embed_args *a, esmtb_stream *s);
  esmtb_status (*layernorm_forward)(esmtb_device *dev, const esmtb_layernorm_args *a,
                                    esmtb_stream *s);
  esmtb_status (*layernorm_backward)(esmtb_device *dev, const esmtb_layernorm_args *a,
                                     esmtb_stream *s);
  esmtb_status (*add)(esmtb_device *dev, const esmtb_add_args *a, esmtb_stream *s);
  esmtb_status (*gelu_backward)(esmtb_device *dev, const esmtb_gelu_backward_args *a,
                                esmtb_stream *s);
  esmtb_status (*bias_grad)(esmtb_device *dev, const esmtb_bias_grad_args *a, esmtb_stream *s);
  esmtb_status (*attention_forward)(esmtb_device *dev, const esmtb_attention_args *a,
                                    esmtb_stream *s);
  esmtb_status (*attention_backward)(esmtb_device *dev, const esmtb_attention_args *a,
                                     esmtb_stream *s);
  esmtb_status (*xent)(esmtb_device *dev, const esmtb_xent_args *a, esmtb_stream *s);
  esmtb_status (*sumsq)(esmtb_device *dev, const esmtb_sumsq_args *a, esmtb_stream *s);
  esmtb_status (*scale)(esmtb_device *dev, const esmtb_scale_args *a, esmtb_stream *s);
  esmtb_status (*convert)(esmtb_device *dev, const esmtb_convert_args *a, esmtb_stream *s);
  /* ABI 2.2, optional (NULL: the core refuses attention maps on this
   * backend): the attention probabilities of esmtb_attention_args.probs
   * for the inference path; training never calls it. */
  esmtb_status (*attention_probs)(esmtb_device *dev, const esmtb_attention_args *a,
                                  esmtb_stream *s);
  /* ABI 2.3, optional (NULL: the core refuses LoRA dropout on this
   * backend): esmtb_dropout_args. */
  esmtb_status (*dropout)(esmtb_device *dev, const esmtb_dropout_args *a, esmtb_stream *s);
} esmtb_compute_ops;

/* Parameter updates. Without adamw the core refuses optimizer.kind adamw
 * on this backend, without lion optimizer.kind lion, naming it. */
typedef struct esmtb_optimizer_ops {
  uint32_t struct_size;
  uint32_t version;          /* ESMTB_OPTIMIZER_OPS_VERSION */

  esmtb_status (*adamw)(esmtb_device *dev, const esmtb_adamw_args *a, esmtb_stream *s);
  esmtb_status (*lion)(esmtb_device *dev, const esmtb_lion_args *a, esmtb_stream *s);
} esmtb_optimizer_ops;

/* Communication between the devices of several ranks; only
 * ESMTB_CAP_MULTI_DEVICE backends. A backend that has comm_unique_id and
 * comm_init gets its communicator from the core: rank 0 calls
 * comm_unique_id, every rank then comm_init on its opened device before the
 * first allreduce. comm_release (or close()) ends it. */
typedef struct esmtb_comm_ops {
  uint32_t struct_size;
  uint32_t version;          /* ESMTB_COMM_OPS_VERSION */

  esmtb_status (*allreduce)(esmtb_device *dev, const esmtb_allreduce_args *a, esmtb_stream *s);
  esmtb_status (*comm_unique_id)(esmtb_device *dev, void *buf, size_t cap, size_t *len);
  esmtb_status (*comm_init)(esmtb_device *dev, const esmtb_comm_init_args *a);
  /* Release the device's communicator before close(): abort = 0 once its
   * work is done (a clean end); abort = 1 when this rank gives up (it failed
   * mid-step, or a peer did): stop the queued work now without waiting for
   * peers, so that freeing memory and close() cannot block. Afterwards
   * allreduce fails and comm_init's peer_failed is never called again.
   * Optional; without it the core passes no peer_failed (close() alone
   * ends the communicator). */
  void (*comm_release)(esmtb_device *dev, int abort);
  /* ZeRO-1 on the device (esmtb_shard_args). Optional: without them the
   * core refuses dist.zero 1 on this backend's device path. */
  esmtb_status (*reduce_scatter)(esmtb_device *dev, const esmtb_shard_args *a, esmtb_stream *s);
  esmtb_status (*allgather)(esmtb_device *dev, const esmtb_shard_args *a, esmtb_stream *s);
} esmtb_comm_ops;

/* What esmt_backend_init returns: who the backend is, and where its
 * groups are. */
typedef struct esmtb_backend {
  uint32_t abi_major;        /* ESMTB_ABI_MAJOR the backend was built with */
  uint32_t abi_minor;
  uint32_t struct_size;      /* sizeof(esmtb_backend) the backend was built with */
  uint32_t caps;             /* esmtb_caps */
  const char *name;          /* "cpu", "turing_fp16", ... */
  const char *description;

  /* Availability, devices and score for this machine and job. */
  esmtb_status (*probe)(const esmtb_job *job, esmtb_probe *out);

  /* The group called `name` (ESMTB_GROUP_*) in layout `version`, or NULL
   * when this backend does not provide it. The core asks once per group,
   * at load time; the table must stay valid while the plugin is loaded. */
  const void *(*group)(const char *name, uint32_t version);
} esmtb_backend;

/* Entry symbols a backend exports (names are the ABI). */
#define ESMTB_INIT_SYMBOL "esmt_backend_init"
#define ESMTB_SCORE_SYMBOL "esmt_backend_score"
/* Optional: `const char *esmt_backend_library_version(void)`, the version of
 * libesmtrain the plugin was built with ("0.2.0"). The shipped backends
 * export it (backends/backend_version.c); the core refuses a plugin whose
 * version differs from its own, naming both files: it belongs to another
 * installation. A plugin without it is not checked. */
#define ESMTB_LIBRARY_VERSION_SYMBOL "esmt_backend_library_version"

typedef const esmtb_backend *(*esmtb_init_fn)(const esmtb_host *host);
typedef int (*esmtb_score_fn)(const esmtb_job *job);

/* What a backend defines (declared here so its definitions are checked). */
ESMTB_EXPORT const esmtb_backend *esmt_backend_init(const esmtb_host *host);
ESMTB_EXPORT int esmt_backend_score(const esmtb_job *job);

#ifdef __cplusplus
}
#endif

#endif /* ESMTRAIN_BACKEND_H */
