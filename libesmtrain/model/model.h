/* SPDX-License-Identifier: MIT */
/* The ESM-2 model object: config, flat parameter layout, device buffers
 * and the activation arena. The graph itself is in model_forward.c and
 * model_backward.c; nothing else in the core knows the architecture. */
#ifndef ESMTRAIN_MODEL_H
#define ESMTRAIN_MODEL_H

#include <stdatomic.h>

#include <stddef.h>

#include "ops_table.h"
#include "context.h"
#include "dtype.h"
#include "param_memory.h"

/* Element offsets of one layer's tensors in the flat fp32 buffers. q, k
 * and v are adjacent so that one GEMM computes all three. */
typedef struct esmt_layer_offsets {
  uint64_t ln1_w, ln1_b;     /* attention.LayerNorm */
  uint64_t qkv_w, qkv_b;     /* query/key/value weight [3d,d], bias [3d] */
  uint64_t out_w, out_b;     /* attention.output.dense */
  uint64_t ln2_w, ln2_b;     /* LayerNorm before the FFN */
  uint64_t fc1_w, fc1_b;     /* intermediate.dense [F,d] */
  uint64_t fc2_w, fc2_b;     /* output.dense [d,F] */
} esmt_layer_offsets;

typedef struct esmt_layout {
  esmt_tensor_info *tensors; /* HF names, shapes, offsets */
  int count;
  uint64_t total;            /* elements in each flat buffer */
  uint64_t embed;            /* word_embeddings [V,d], also the tied decoder */
  esmt_layer_offsets *layers;
  /* The parts the graph runs in: the embedding, each layer, the head
   * (final LayerNorm and LM head); part i is [part_bounds[i],
   * part_bounds[i + 1]), n_parts = L + 2. */
  uint64_t *part_bounds;
  int n_parts;
  uint64_t lnf_w, lnf_b;     /* emb_layer_norm_after */
  uint64_t head_w, head_b;   /* lm_head.dense */
  uint64_t head_ln_w, head_ln_b;
  uint64_t out_b;            /* lm_head.bias [V] */
  /* The LayerNorm w/b (each d floats), which the kernels read in fp32
   * whatever the compute dtype: layer by layer ln1 w/b, ln2 w/b, then the
   * final and the head's. esmt_norm_tensor_count of them. */
  uint64_t *norm_offs;
  int n_norm;
  /* The task head's tensors (model_head.c), after the LM head; cls_lo is
   * where they start (layout.total without a head). A sequence head has
   * classifier.dense and classifier.out_proj, a residue head only
   * classifier (in cls_out_w/b; cls_dense_* unused). */
  uint64_t cls_lo;
  uint64_t cls_dense_w, cls_dense_b, cls_out_w, cls_out_b;
  /* LoRA's A and B of layer l, target t (model_lora.c's order): lora[l].a[t]
   * and .b[t], 0 where the target has no adapter; NULL without LoRA. */
  struct esmt_lora_offsets *lora;
} esmt_layout;

/* LoRA (model_lora.c). Targets in layout order: query, key, value,
 * attention output, FFN down, FFN up (the ESMT_LORA_* bits 1 << t). */
#define ESMT_LORA_TARGETS 6
#define ESMT_LORA_T_FFN_DOWN 4
#define ESMT_LORA_T_FFN_UP 5
typedef struct esmt_lora_offsets {
  uint64_t a[ESMT_LORA_TARGETS], b[ESMT_LORA_TARGETS];
} esmt_lora_offsets;
/* Target t's module name in a layer ("attention.self.query") and its
 * linear map's input and output widths. */
ESMT_HIDDEN const char *esmt_lora_target(const esmt_model_config *cfg, int t, int *in, int *out);
/* Parameters of one layer's adapters. */
ESMT_HIDDEN uint64_t esmt_lora_layer_params(const esmt_model_config *cfg);

/* Number of LayerNorm w/b tensors of a config (each hidden_size floats). */
ESMT_HIDDEN int esmt_norm_tensor_count(const esmt_model_config *cfg);
/* The i-th ESM-2 size preset's name, smallest first; NULL past the last. */
ESMT_HIDDEN const char *esmt_model_preset_name(int i);

/* Build the layout of a validated config; frees with esmt_layout_free. */
ESMT_HIDDEN esmt_status esmt_layout_build(const esmt_model_config *cfg, esmt_layout *out);
ESMT_HIDDEN void esmt_layout_free(esmt_layout *l);

/* The oldest esmt_model_config a caller may pass: the one before
 * `precision` was appended (that caller gets ESMT_PRECISION_AUTO). */
#define ESMT_MODEL_CONFIG_MIN_SIZE offsetof(esmt_model_config, precision)

/* Reject impossible configs with a message naming the field. */
ESMT_HIDDEN esmt_status esmt_model_config_validate(const esmt_model_config *cfg);

/* Activations of one micro-batch of N = B*T rows (device pointers), carved
 * from one allocation. Per-layer arrays have L entries (res has L+1).
 * `void *` tensors are in the model's compute dtype (m->dtype, m->esize
 * bytes per element); `float *` ones are fp32 whatever the precision. */
typedef struct esmt_activations {
  int32_t *tokens, *labels, *seq_len;
  float *row_scale;
  float *loss_sum;
  void **res;                /* residual stream entering layer l; res[L] is the output */
  void **res_mid;            /* after attention, before the FFN */
  void **ln1, **qkv, **attn, **ln2, **fc1_pre, **fc1_out;
  float **ln1_mean, **ln1_rstd, **lse, **ln2_mean, **ln2_rstd;
  void *lnf, *head_pre, *head_act, *head_ln;
  float *lnf_mean, *lnf_rstd, *head_mean, *head_rstd;
  void *logits, *dlogits;
  /* backward scratch */
  void *d_wide;              /* [N, max(F, 3d)] */
  void *d_narrow;            /* [N, d] */
  void *d_resid;             /* [N, d] gradient of the residual stream */
  void *tmp;                 /* [N, d] projection outputs before the residual add */
} esmt_activations;

/* Per-layer pointer arrays of esmt_activations: how many of each kind. */
#define ESMT_ACT_VTABLES 8
#define ESMT_ACT_FTABLES 5

/* Bytes of the activation arena for B x T with activations of `esize`
 * bytes, optionally with per-layer recomputation (also the planner's). It
 * depends on B * T only: the arena serves any shape within that many tokens. */
ESMT_HIDDEN uint64_t esmt_activation_bytes(const esmt_model_config *cfg, int B, int T, int esize,
                                           int recompute);

#define ESMT_MAX_HALF_HEAD 512

/* Per-op time by role ("forward: FFN up / gemm") when $ESMT_PROFILE is
 * set, logged at model destroy (model_profile.c): ESMT_PROFILE=1 times
 * each op synchronised on the host; ESMT_PROFILE=events brackets each op
 * with the backend's timing events and reads them back every
 * ESMT_PROFILE_PENDING ops, so the work stays asynchronous and the time
 * between ops (launches, host work, other streams) is measured too. */
#define ESMT_PROFILE_SLOTS 64
#define ESMT_PROFILE_KEY 56
#define ESMT_PROFILE_PENDING 512
enum { ESMT_PROFILE_OFF, ESMT_PROFILE_SYNC, ESMT_PROFILE_EVENTS };
typedef struct esmt_op_profile {
  int mode;                          /* ESMT_PROFILE_* */
  int n;                             /* keys in use */
  char key[ESMT_PROFILE_SLOTS][ESMT_PROFILE_KEY];
  double seconds[ESMT_PROFILE_SLOTS];
  double flops[ESMT_PROFILE_SLOTS];  /* gemm and attention only */
  uint64_t calls[ESMT_PROFILE_SLOTS];
  /* ESMT_PROFILE_EVENTS: ops recorded but not read back yet */
  esmtb_event *ev[2 * ESMT_PROFILE_PENDING]; /* start, end of each pending op */
  int pending;
  int pend_key[ESMT_PROFILE_PENDING];
  double pend_flops[ESMT_PROFILE_PENDING];
  double between_s;                  /* device idle between consecutive ops */
  double span_s;                     /* first start to last end, summed over read-backs */
  uint64_t untimed;                  /* ops whose events could not be read */
} esmt_op_profile;
/* Test hook (tests/gpu/emu/mutants.sh): read the events back without
 * waiting for them. */
ESMT_HIDDEN extern int esmt_test_profile_drop_sync;

/* Packed rows of the current micro-batch (esmt_batch.num_segments > 0,
 * model_packing.c): device copies of the segment arrays and the
 * per-segment dropout scales, room for `cap` segments. nseg == 0 is the
 * right-padded layout. esmt_embed_args and esmt_attention_args read it, so
 * every embed/attention call (forward, backward, recomputation) agrees. */
typedef struct esmt_packed {
  int nseg, max_len, cap;
  int32_t *start, *len;      /* device [cap] */
  float *scale;              /* device [cap]: the embedding's row_scale */
  void *buf;                 /* the one device allocation behind them */
} esmt_packed;

/* A tensor the model carries but does not train (io/carried_tensors.h);
 * dtype is an esmt_st_dtype value (io/safetensors.h), data its raw bytes. */
typedef struct esmt_carried_tensor {
  char *name;
  int dtype, ndim;
  int64_t shape[8];
  void *data;
  uint64_t nbytes;
} esmt_carried_tensor;

struct esmt_model {
  esmt_context *ctx;
  const esmtb_ops *ops;
  esmtb_device *dev;
  esmtb_stream *stream;      /* NULL: the device's default stream */
  esmt_model_config cfg;
  int L, d, H, hd, F, V;
  esmt_layout layout;
  /* Where the parameters, gradients and optimizer state live and the copy
   * the kernels compute on (memory/param_memory.h). */
  esmt_param_memory mem;
  /* Compute precision: ESMTB_F32 computes on the fp32 weights; F16/BF16 on
   * mem.compute_lowp. Activations are in `dtype` too. */
  esmtb_dtype dtype;
  size_t esize;              /* bytes per element of dtype */
  float *rope_cos, *rope_sin;               /* device [max_positions, hd/2] */
  float *scalar;                            /* device fp32 scratch for reductions */
  float inv_freq[ESMT_MAX_HALF_HEAD];       /* rotary inverse frequencies in use */
  /* Tensors the model carries but does not train, kept byte for byte from
   * an imported Hugging Face directory through checkpoints and exports
   * (io/carried_tensors.h): the rotary inv_freq buffers (inv_freq above is
   * layer 0's), the contact head, the unused position table. */
  esmt_carried_tensor *carried;
  int n_carried;
  /* The task head's label names (classes, labels or targets; NULL: none
   * given), saved in checkpoints with the head (model_labels.c). */
  char **label_names;
  int n_label_names;

  /* activation arena, sized for act_N tokens (any B x T with B * T <= act_N) */
  void *arena;
  uint64_t arena_bytes;
  uint64_t act_N;
  /* Activation recompute: `recompute` is the setting (applied by the next
   * esmt_model_reserve), `act_recompute` how the arena is carved. With it
   * only res[l] is kept per layer; backward re-runs each layer's forward
   * into the shared set (esmt_layer_forward) before differentiating it. */
  int recompute, act_recompute;
  /* esmt_model_set_deterministic(m, 0): the attention backward may take the
   * backend's faster, non-deterministic variant (ABI 1.6). */
  int nondeterministic;
  /* LoRA dropout (model_lora.c): esmt_model_set_training(m, 0) turns it off
   * for evaluation; the masks are drawn from `seed` (esmt_model_create's)
   * and `lora_draw`, the training forwards so far (a recompute in backward
   * redraws the same masks). */
  int eval_mode;
  uint64_t seed, lora_draw;
  int lora_dropout_on;       /* the current pass drops (a training forward) */
  esmt_activations act;
  void **act_vtables;        /* host storage behind the per-layer arrays */
  float **act_ftables;

  /* what the last forward saw, for backward */
  int have_forward;
  int B, T;
  uint64_t selected;
  double normalizer;
  int32_t *host_seq_len;     /* [act_N] (rows <= tokens) */
  esmt_packed packed;
  esmt_op_profile profile;

  /* Data parallelism: when fn is set, backward calls it as soon as the
   * gradients [from, layout.total) are final (after the LM head and final
   * LayerNorm, after each layer, after the embedding), so that their
   * all-reduce can overlap the rest of backward. async 0: backward waits
   * for m->stream before each call (the hook reads the gradients on the
   * host); 1: the hook orders its own device work after the queued ops (an
   * event on m->stream), so backward does not wait. */
  struct {
    void (*fn)(void *user, uint64_t from);
    void *user;
    int async;
  } grads_hook;
  /* One call at a time (model_guard.c): the thread in a call (0: none),
   * the call's name, and how deep that thread has entered. */
  _Atomic long guard_thread;
  const char *_Atomic guard_call;
  int guard_depth;
  /* Fine-tuning (model_head.c, model_freeze.c): the task head's device
   * buffers and host targets (NULL without a head); the first element
   * that trains (everything below is frozen: no gradient, no moments) and
   * the first layer backward differentiates; the tensors the optimizer
   * steps (all of layout.tensors, or those that train). */
  struct esmt_head *head;
  struct esmt_lora *lora;    /* LoRA's device buffers (model_lora.c); NULL without */
  int base_frozen;           /* LoRA: every encoder weight frozen, backward still runs */
  uint64_t train_lo;
  int train_from_layer;
  /* a head warm-up's update (esmt_model_hold_encoder): backward stops at the head */
  int hold_encoder;
  esmt_tensor_info *opt_tensors; /* the encoder's (or adapters') first, n_opt_body of them, */
  int n_opt_tensors, n_opt_body; /* then the task head's */
};

/* LoRA's forward and backward on layer l's linear map to target t
 * (model_lora.c): y[:, col..col+out) (ld ldy) += s (x A^T) B^T, keeping
 * x A^T for backward; dB += s dy^T (x A^T), dA += (s dy B)^T x, and
 * dx [N, in] += (s dy B) A. `x` is the map's input [N, in]. */
ESMT_HIDDEN esmt_status esmt_lora_forward(esmt_model *m, int l, int t, const void *x, void *y,
                                          int ldy);
/* The FFN's first map with its adapter, in place of the GELU linear:
 * fc1_out = s (x A^T) B^T + b, then pre = x W^T + fc1_out and fc1_out =
 * gelu(pre) (the GEMM's epilogue over beta = 1). */
ESMT_HIDDEN esmt_status esmt_lora_ffn_up(esmt_model *m, int l, const void *x, void *out,
                                         void *pre);
ESMT_HIDDEN esmt_status esmt_lora_backward(esmt_model *m, int l, int t, const void *x,
                                           const void *dy, int lddy, void *dx);
/* A device fp32 scratch of 2 x d floats that frozen LayerNorms' gradients
 * go to under LoRA (the op always accumulates them). */
ESMT_HIDDEN float *esmt_lora_discard(esmt_model *m);
ESMT_HIDDEN void esmt_lora_free(esmt_model *m);
/* Called by esmt_model_forward before the graph: the pass's LoRA dropout
 * on (a new draw) or off; esmt_model_infer turns it off. */
ESMT_HIDDEN void esmt_lora_begin_pass(esmt_model *m, int training);
/* The Philox stream (esmtrain/philox.h) of adapter (layer l, target t)'s
 * dropout mask in training forward number `draw`; the key is the model seed. */
ESMT_HIDDEN uint64_t esmt_lora_dropout_stream(uint64_t draw, int l, int t);
/* esmt_model_lora_merge's W += s B A on a host copy of the flat weights
 * (`host`, layout offsets), in double; the adapters stay as they are. */
ESMT_HIDDEN void esmt_lora_merge_host(const esmt_model *m, float *host);

/* The task head (model_head.c). esmt_head_stage checks and keeps a
 * batch's targets (after esmt_model_stage_batch; sets m->normalizer and
 * the result's selected count); run_forward/run_backward follow the final
 * LayerNorm / precede its backward (d_narrow receives d lnf, unless
 * nothing below the head trains); download copies the head's outputs and
 * the loss. */
ESMT_HIDDEN esmt_status esmt_head_stage(esmt_model *m, const esmt_batch *b,
                                        esmt_forward_result *r, const char *fn);
ESMT_HIDDEN esmt_status esmt_head_run_forward(esmt_model *m);
ESMT_HIDDEN esmt_status esmt_head_run_backward(esmt_model *m);
ESMT_HIDDEN esmt_status esmt_head_download(esmt_model *m, float *outputs, double *loss_sum);
/* The head's outputs of an inference pass that computed lnf (esmt_model_infer). */
ESMT_HIDDEN esmt_status esmt_head_infer(esmt_model *m, const esmt_batch *b, float *outputs);
ESMT_HIDDEN void esmt_head_free(esmt_model *m);
/* What trains (model_freeze.c): train_lo, train_from_layer and the
 * optimizer's tensors from the config and the layout (before the
 * parameter memory, which holds moments from train_lo on). */
ESMT_HIDDEN esmt_status esmt_model_setup_training(esmt_model *m);
/* 1: the next backward passes differentiate the task head alone (the
 * encoder is held: an update of esmt_optimizer_config.head_only_steps);
 * 0: what the config trains. */
ESMT_HIDDEN void esmt_model_hold_encoder(esmt_model *m, int hold);
/* The first layer backward differentiates; past num_layers: none. */
ESMT_HIDDEN int esmt_model_backward_from_layer(const esmt_model *m);
/* The first element that trains in a config's layout (what the planner
 * holds moments from). */
ESMT_HIDDEN uint64_t esmt_layout_train_lo(const esmt_model_config *cfg, const esmt_layout *ly);
/* Linear layers as the graph runs them (model_linear.c): y = x W^T + b
 * (GELU fused into y with its pre-activation kept in gelu_pre when given),
 * and dx = dy W, dW += dy^T x, db += sum dy (only dx when frozen). */
ESMT_HIDDEN esmt_status esmt_model_linear_gelu(esmt_model *m, const void *x, uint64_t w,
                                               uint64_t b, void *y, int N, int in, int out,
                                               void *gelu_pre, const char *where);
ESMT_HIDDEN esmt_status esmt_model_linear(esmt_model *m, const void *x, uint64_t w, uint64_t b,
                                          void *y, int N, int in, int out, const char *where);
ESMT_HIDDEN esmt_status esmt_model_linear_backward_with(esmt_model *m, const void *x, uint64_t w,
                                                        uint64_t b, const void *dy, void *dx,
                                                        int N, int in, int out, int frozen,
                                                        const char *where);
ESMT_HIDDEN esmt_status esmt_model_linear_backward(esmt_model *m, const void *x, uint64_t w,
                                                   uint64_t b, const void *dy, void *dx, int N,
                                                   int in, int out, const char *where);
/* Enter a call that uses the model's buffers (model_guard.c): ESMT_OK, or
 * ESMT_ERR_STATE naming the call another thread has in progress. Every
 * ESMT_OK is paired with esmt_model_leave. */
ESMT_HIDDEN esmt_status esmt_model_enter(esmt_model *m, const char *fn);
ESMT_HIDDEN void esmt_model_leave(esmt_model *m);


/* A weight at element offset `off` as the compute ops read it (the half
 * copy, or the fp32 weights in fp32), wherever the parameter memory keeps
 * it now (memory/param_memory.h: esmt_param_view). LayerNorm weights and
 * biases are always fp32 (the ABI's w/b). */
static inline const void *esmt_weight(const esmt_model *m, uint64_t off) {
  return esmt_param_view_at(&m->mem.weights, off);
}

/* A LayerNorm weight or bias (fp32, device) at element offset `off`: in
 * the fp32 compute weights (the master itself on the device layer), or,
 * where a layer keeps them apart (offload in half, streaming), in its
 * table of norms. */
static inline float *esmt_norm_param(const esmt_model *m, uint64_t off) {
  if (!m->mem.norm_dev) /* fp32 compute: the weights themselves; half: the fp32 master */
    return m->mem.compute_lowp ? m->mem.compute32 + off
                               : (float *)esmt_param_view_at(&m->mem.weights, off);
  for (int i = 0; i < m->layout.n_norm; i++)
    if (m->layout.norm_offs[i] == off) return m->mem.norm_dev + (uint64_t)i * (uint64_t)m->d;
  return NULL; /* not a LayerNorm tensor: a bug the backend reports as a NULL argument */
}

/* The fp32 gradient at element offset `off` (device), wherever it is now. */
static inline float *esmt_grad(const esmt_model *m, uint64_t off) {
  return (float *)esmt_param_view_at(&m->mem.grad_view, off);
}

/* Create a model, with optimizer offload when `offload` says so (NULL:
 * none); esmt_model_create is this with NULL. */
struct esmt_offload_options;
ESMT_HIDDEN esmt_status esmt_model_create_with(esmt_context *ctx, const esmt_model_config *cfg,
                                               uint64_t seed,
                                               const struct esmt_offload_options *offload,
                                               esmt_model **out);

/* Copy `bytes` between caller host memory and a point `buf` inside one of
 * the flat buffers (m->mem: master, gradients, moments), wherever the
 * parameter memory's layer keeps it. */
ESMT_HIDDEN esmt_status esmt_master_copy(esmt_model *m, void *host, void *buf, uint64_t bytes,
                                         int to_master);

/* The compute dtype for `precision` (an esmt_precision) on a backend, or
 * ESMT_ERR_UNSUPPORTED saying what the backend can do. */
ESMT_HIDDEN esmt_status esmt_resolve_precision(const esmtb_ops *ops, int precision,
                                               esmtb_dtype *dtype);

/* Refresh `count` elements of params_lowp from params at element `offset`
 * (no-op in fp32); call after anything writes params outside AdamW. */
ESMT_HIDDEN esmt_status esmt_model_sync_lowp(esmt_model *m, uint64_t offset, uint64_t count);

/* Make the activation arena fit B x T (reallocates when it is too small or
 * the recompute setting changed). */
ESMT_HIDDEN esmt_status esmt_model_reserve(esmt_model *m, int B, int T);
/* The same for a carving mode: 0 keep everything, 1 recompute, 2 inference
 * (esmt_model_infer: one layer's intermediates, two residual buffers, no
 * backward buffers). The next training forward re-carves. */
ESMT_HIDDEN esmt_status esmt_model_reserve_mode(esmt_model *m, int B, int T, int mode);

/* A batch onto the device for a forward: its shape checked, the arena
 * carved in `mode` (esmt_model_reserve_mode), the rows checked (or the
 * packed segments prepared) into *r, tokens and row lengths uploaded; m->B
 * and m->T set. Messages start with fn. */
typedef struct esmt_attention_maps esmt_attention_maps; /* attention_maps.h */
ESMT_HIDDEN esmt_status esmt_model_run_infer(
    esmt_model *m, uint64_t layers, int logits,
    esmt_status (*capture)(esmt_model *m, int layer, const void *rep, void *user), void *user,
    esmt_attention_maps *maps);
ESMT_HIDDEN esmt_status esmt_model_stage_batch(esmt_model *m, const esmt_batch *b, int mode,
                                               esmt_forward_result *r, const char *fn);

/* A device allocation for the model, failing with its name, size and the
 * model's out-of-memory advice (esmt_model_device_oom: the parameter
 * memory's device_oom callback, `model` the esmt_model). */
ESMT_HIDDEN esmt_status esmt_model_device_oom(void *model, esmt_status st);
ESMT_HIDDEN esmt_status esmt_model_dev_alloc(esmt_model *m, uint64_t bytes, void **out,
                                             const char *what);

/* Append to a failed device allocation's ESMT_ERR_OUT_OF_MEMORY message
 * what to change (other statuses pass through); `B` x `T` is the
 * micro-batch when the activation arena failed, else 0. */
ESMT_HIDDEN esmt_status esmt_oom_advice(const esmt_model *m, esmt_status st, int B, int T);
/* Packed rows (model_packing.c). Whether the backend takes them: OK, or
 * ESMT_ERR_UNSUPPORTED with a message naming it. */
ESMT_HIDDEN esmt_status esmt_packing_supported(const esmtb_ops *ops);
/* Check a packed batch on the host (segments, padding, ids, labels), fill
 * the counts and host_seq_len, and upload the segments into m->packed. */
ESMT_HIDDEN esmt_status esmt_packed_prepare(esmt_model *m, const esmt_batch *b,
                                            esmt_forward_result *r);
/* Zero the logits [B*T, V] of positions in no segment. */
ESMT_HIDDEN void esmt_packed_zero_padding(const esmt_model *m, const esmt_batch *b, float *logits);
ESMT_HIDDEN void esmt_packed_free(esmt_model *m);

/* Attention arguments of layer l (forward fields; backward adds dout/dqkv). */
ESMT_HIDDEN esmtb_attention_args esmt_attention_args(const esmt_model *m, int l);

/* Embedding arguments (forward fields; backward adds dout/dE). */
ESMT_HIDDEN esmtb_embed_args esmt_embed_args(const esmt_model *m);

/* Before the ops that read part `l` of the weights (l in [0, L) a layer,
 * ESMT_PART_EMBEDDING, ESMT_PART_HEAD: the final LayerNorm and the LM head,
 * whose tied decoder also reads the embedding): the parameter memory's
 * weights_needed for its flat range (memory/param_layer.h). */
#define ESMT_PART_EMBEDDING (-1)
#define ESMT_PART_HEAD (-2)
ESMT_HIDDEN esmt_status esmt_model_need_weights(esmt_model *m, int l);

/* The graph. */
ESMT_HIDDEN esmt_status esmt_model_run_forward(esmt_model *m);
/* One transformer layer l from res[l], batch shape and state read from m.
 * full = 1: everything through res[l+1] (the forward pass); full = 0: only
 * what backward reads, i.e. up to the FFN's GELU (recompute). */
ESMT_HIDDEN esmt_status esmt_layer_forward(esmt_model *m, int l, int full);
ESMT_HIDDEN esmt_status esmt_model_run_backward(esmt_model *m);

/* Install rotary inverse frequencies (hd/2 values; NULL = the default
 * 10000^(-2c/hd)) and rebuild the device tables. */
ESMT_HIDDEN esmt_status esmt_model_set_inv_freq(esmt_model *m, const float *inv_freq);

/* Free the carried tensors (io/carried_tensors.h) and forget them. */
ESMT_HIDDEN void esmt_model_drop_carried(esmt_model *m);

/* HF-style seeded initialisation of the parameter buffer. */
ESMT_HIDDEN esmt_status esmt_model_init_params(esmt_model *m, uint64_t seed);

/* Profiling (model_profile.c): set the mode from $ESMT_PROFILE at create;
 * begin/end bracket one op (args: the op's args struct, for its FLOPs);
 * report logs the table and frees the events at destroy. */
ESMT_HIDDEN void esmt_profile_init(esmt_model *m);
ESMT_HIDDEN double esmt_profile_begin(esmt_model *m);
ESMT_HIDDEN void esmt_profile_end(esmt_model *m, const char *where, const char *op,
                                  const void *args, double t0);
ESMT_HIDDEN void esmt_profile_report(esmt_model *m);

/* Call a backend op and turn a failure into "<where>: <op>: <message>". */
#define ESMT_OP(m, op, args, where)                                                 \
  do {                                                                              \
    if (!(m)->ops->op)                                                              \
      return esmt_fail(ESMT_ERR_UNSUPPORTED, "%s: backend %s does not implement %s", \
                       where, (m)->ops->name, #op);                                 \
    double op_t0_ = esmt_profile_begin(m);                                          \
    esmtb_status op_st_ = (m)->ops->op((m)->dev, &(args), (m)->stream);             \
    if (op_st_) return esmt_fail_prefix((esmt_status)op_st_, "%s: %s: ", where, #op);\
    esmt_profile_end(m, where, #op, &(args), op_t0_);                               \
  } while (0)

#endif
