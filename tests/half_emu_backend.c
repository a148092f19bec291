/* SPDX-License-Identifier: MIT */
/* See half_emu_backend.h. */
#include "half_emu_backend.h"
#include "backend_tables.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const esmtb_ops *g_cpu;
static esmtb_ops g_ops;
static const esmt_model *g_m;
static half_emu_stats g_stats;
static esmt_backend_entry g_installed;
static const esmt_backend_entry *g_real_entry;

void half_emu_install(esmt_context *ctx) {
  g_real_entry = ctx->backend;
  g_installed = *g_real_entry;
  g_installed.ops = half_emu_ops(g_real_entry->ops, ESMTB_CAP_F16 | ESMTB_CAP_BF16);
  ctx->backend = &g_installed;
}

void half_emu_uninstall(esmt_context *ctx) {
  if (g_real_entry) ctx->backend = g_real_entry;
  g_real_entry = NULL;
}

/* ---- allocation tracking ---------------------------------------------- */

typedef struct region { const char *p; uint64_t bytes; } region;
static region g_allocs[256];
static int g_nallocs;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...) {
  g_stats.problems++;
  if (g_stats.problems > 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_stats.first_problem, sizeof g_stats.first_problem, fmt, ap);
  va_end(ap);
}

static esmtb_status emu_alloc(esmtb_device *d, esmtb_mem_kind k, size_t bytes, void **out) {
  esmtb_status st = g_cpu->alloc(d, k, bytes, out);
  if (!st && g_nallocs < 256) g_allocs[g_nallocs++] = (region){*out, bytes};
  return st;
}

static void emu_free(esmtb_device *d, esmtb_mem_kind k, void *p) {
  for (int i = 0; i < g_nallocs; i++)
    if (g_allocs[i].p == p) g_allocs[i] = g_allocs[--g_nallocs];
  g_cpu->free(d, k, p);
}

/* ---- pointer checks ----------------------------------------------------- */

enum { R_ARENA = 1, R_LOWP = 2, R_P32 = 4, R_GRAD = 8, R_ANY = 16 };
/* Linear weights/biases: the half copy, or the fp32 master in fp32. */
#define R_W (g_m && g_m->mem.compute_lowp ? R_LOWP : R_P32)

static int inside(const void *p, uint64_t bytes, const void *base, uint64_t size, size_t esize) {
  const char *c = p, *b = base;
  return b && c >= b && c + bytes <= b + size && (uint64_t)(c - b) % esize == 0;
}

/* `p` holds `n` elements of `esize` bytes inside one of the `roles`. */
static void check(const char *op, const char *field, const void *p, uint64_t n, size_t esize,
                  int roles) {
  if (!p) { problem("%s: %s is NULL", op, field); return; }
  const uint64_t bytes = n * esize, total = g_m ? g_m->layout.total : 0;
  if (!g_m) roles = R_ANY;
  if ((roles & R_ARENA) && inside(p, bytes, g_m->arena, g_m->arena_bytes, esize)) return;
  if ((roles & R_LOWP) && inside(p, bytes, g_m->mem.compute_lowp, total * g_m->esize, esize)) return;
  if ((roles & R_P32) && inside(p, bytes, g_m->mem.master, total * 4, esize)) return;
  if ((roles & R_GRAD) && inside(p, bytes, g_m->mem.grads, total * 4, esize)) return;
  if (roles & R_ANY)
    for (int i = 0; i < g_nallocs; i++)
      if (inside(p, bytes, g_allocs[i].p, g_allocs[i].bytes, 1)) return;
  problem("%s: %s (%llu elements of %zu bytes) is not inside its buffer (roles 0x%x)", op, field,
          (unsigned long long)n, esize, (unsigned)roles);
}

static size_t dsize(esmtb_dtype t) { return t == ESMTB_F16 || t == ESMTB_BF16 ? 2 : 4; }
static int is_half(esmtb_dtype t) { return t == ESMTB_F16 || t == ESMTB_BF16; }

static void check_dtype(const char *op, esmtb_dtype t) {
  g_stats.ops++;
  if (is_half(t)) g_stats.half_ops++;
  if (g_m && t != g_m->dtype)
    problem("%s: dtype %d, the model computes in %d", op, (int)t, (int)g_m->dtype);
}

/* ---- half <-> fp32 temporaries ------------------------------------------ */

static float *up(esmtb_dtype t, const void *p, uint64_t n) {
  if (!p) return NULL;
  float *f = malloc((n ? n : 1) * sizeof *f);
  if (f) esmt_to_f32(t, p, f, n);
  return f;
}

static float *scratch(uint64_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void down(esmtb_dtype t, void *p, const float *f, uint64_t n) {
  uint16_t *h = p;
  for (uint64_t i = 0; p && f && i < n; i++)
    h[i] = t == ESMTB_BF16 ? esmt_f32_to_bf16(f[i]) : esmt_f32_to_f16(f[i]);
}

static uint64_t mat(int rows, int cols, int ld) {
  return rows > 0 && cols > 0 ? (uint64_t)(rows - 1) * (uint64_t)ld + (uint64_t)cols : 0;
}

/* ---- ops ------------------------------------------------------------------ */

static esmtb_status emu_gemm(esmtb_device *d, const esmtb_gemm_args *a, esmtb_stream *s) {
  check_dtype("gemm", a->dtype);
  const size_t es = dsize(a->dtype);
  const uint64_t na = a->trans_a ? mat(a->k, a->m, a->lda) : mat(a->m, a->k, a->lda);
  const uint64_t nb = a->trans_b ? mat(a->n, a->k, a->ldb) : mat(a->k, a->n, a->ldb);
  const uint64_t nc = mat(a->m, a->n, a->ldc);
  check("gemm", "a", a->a, na, es, R_ARENA);
  check("gemm", "b", a->b, nb, es, R_ARENA | R_W);
  if (a->c_f32) {
    g_stats.gemm_c_f32++;
    if (!is_half(a->dtype) || a->bias || a->epilogue || a->beta != 1.0f)
      problem("gemm: c_f32 with dtype %d, bias %p, epilogue %d, beta %g", (int)a->dtype, a->bias,
              (int)a->epilogue, (double)a->beta);
    check("gemm", "c (fp32 gradient)", a->c, nc, 4, R_GRAD);
  } else {
    /* fp32 weight gradients accumulate in place; half ones never do */
    check("gemm", "c", a->c, nc, es, is_half(a->dtype) ? R_ARENA : R_ARENA | R_GRAD);
  }
  if (a->bias) check("gemm", "bias", a->bias, (uint64_t)a->n, es, R_W);
  if (a->pre) check("gemm", "pre", a->pre, nc, es, R_ARENA);
  if (!is_half(a->dtype)) return g_cpu->gemm(d, a, s);
  esmtb_gemm_args f = *a;
  f.dtype = ESMTB_F32;
  f.c_f32 = 0;
  float *A = up(a->dtype, a->a, na), *B = up(a->dtype, a->b, nb);
  float *C = a->c_f32 ? NULL : a->beta != 0.0f ? up(a->dtype, a->c, nc) : scratch(nc);
  float *bias = up(a->dtype, a->bias, a->n);
  float *pre = a->pre ? scratch(nc) : NULL;
  f.a = A; f.b = B; f.bias = bias; f.pre = pre;
  if (!a->c_f32) f.c = C;
  esmtb_status st = g_cpu->gemm(d, &f, s);
  if (!st && !a->c_f32) down(a->dtype, a->c, C, nc);
  if (!st && pre) down(a->dtype, a->pre, pre, nc);
  free(A); free(B); free(C); free(bias); free(pre);
  return st;
}

static esmtb_status emu_embed(esmtb_device *d, const esmtb_embed_args *a, esmtb_stream *s,
                              int backward) {
  const char *op = backward ? "embed_backward" : "embed_forward";
  check_dtype(op, a->dtype);
  const size_t es = dsize(a->dtype);
  const uint64_t N = (uint64_t)a->B * a->T, nd = N * (uint64_t)a->d;
  const uint64_t nE = (uint64_t)(g_m ? g_m->V : ESMT_VOCAB_SIZE) * (uint64_t)a->d;
  check(op, "tokens", a->tokens, N, 4, R_ARENA);
  check(op, "row_scale", a->row_scale, (uint64_t)a->B, 4, R_ARENA);
  check(op, "E", a->E, nE, es, R_W);
  if (backward) {
    check(op, "dout", a->dout, nd, es, R_ARENA);
    check(op, "dE (fp32)", a->dE, nE, 4, R_GRAD);
  } else {
    check(op, "out", a->out, nd, es, R_ARENA);
  }
  if (!is_half(a->dtype)) return backward ? g_cpu->embed_backward(d, a, s) : g_cpu->embed_forward(d, a, s);
  esmtb_embed_args f = *a;
  f.dtype = ESMTB_F32;
  float *E = up(a->dtype, a->E, nE), *io = backward ? up(a->dtype, a->dout, nd) : scratch(nd);
  f.E = E;
  esmtb_status st;
  if (backward) {
    f.dout = io;
    st = g_cpu->embed_backward(d, &f, s);
  } else {
    f.out = io;
    st = g_cpu->embed_forward(d, &f, s);
    if (!st) down(a->dtype, a->out, io, nd);
  }
  free(E); free(io);
  return st;
}
static esmtb_status emu_embed_fwd(esmtb_device *d, const esmtb_embed_args *a, esmtb_stream *s) {
  return emu_embed(d, a, s, 0);
}
static esmtb_status emu_embed_bwd(esmtb_device *d, const esmtb_embed_args *a, esmtb_stream *s) {
  return emu_embed(d, a, s, 1);
}

static esmtb_status emu_ln(esmtb_device *d, const esmtb_layernorm_args *a, esmtb_stream *s,
                           int backward) {
  const char *op = backward ? "layernorm_backward" : "layernorm_forward";
  check_dtype(op, a->dtype);
  const size_t es = dsize(a->dtype);
  const uint64_t n = (uint64_t)a->N * (uint64_t)a->d;
  check(op, "x", a->x, n, es, R_ARENA);
  check(op, "w (fp32)", a->w, (uint64_t)a->d, 4, R_P32);
  check(op, "b (fp32)", a->b, (uint64_t)a->d, 4, R_P32);
  check(op, "mean", a->mean, (uint64_t)a->N, 4, R_ARENA);
  check(op, "rstd", a->rstd, (uint64_t)a->N, 4, R_ARENA);
  if (backward) {
    check(op, "dout", a->dout, n, es, R_ARENA);
    check(op, "dx", a->dx, n, es, R_ARENA);
    check(op, "dw (fp32)", a->dw, (uint64_t)a->d, 4, R_GRAD);
    check(op, "db (fp32)", a->db, (uint64_t)a->d, 4, R_GRAD);
  } else {
    check(op, "out", a->out, n, es, R_ARENA);
  }
  if (!is_half(a->dtype))
    return backward ? g_cpu->layernorm_backward(d, a, s) : g_cpu->layernorm_forward(d, a, s);
  esmtb_layernorm_args f = *a;
  f.dtype = ESMTB_F32;
  float *x = up(a->dtype, a->x, n), *o = NULL, *dout = NULL;
  f.x = x;
  esmtb_status st;
  if (backward) {
    dout = up(a->dtype, a->dout, n);
    o = a->accumulate_dx ? up(a->dtype, a->dx, n) : scratch(n);
    f.dout = dout;
    f.dx = o;
    st = g_cpu->layernorm_backward(d, &f, s);
    if (!st) down(a->dtype, a->dx, o, n);
  } else {
    o = scratch(n);
    f.out = o;
    st = g_cpu->layernorm_forward(d, &f, s);
    if (!st) down(a->dtype, a->out, o, n);
  }
  free(x); free(o); free(dout);
  return st;
}
static esmtb_status emu_ln_fwd(esmtb_device *d, const esmtb_layernorm_args *a, esmtb_stream *s) {
  return emu_ln(d, a, s, 0);
}
static esmtb_status emu_ln_bwd(esmtb_device *d, const esmtb_layernorm_args *a, esmtb_stream *s) {
  return emu_ln(d, a, s, 1);
}

static esmtb_status emu_add(esmtb_device *d, const esmtb_add_args *a, esmtb_stream *s) {
  check_dtype("add", a->dtype);
  const size_t es = dsize(a->dtype);
  check("add", "a", a->a, a->n, es, R_ARENA);
  check("add", "b", a->b, a->n, es, R_ARENA);
  check("add", "y", a->y, a->n, es, R_ARENA);
  if (!is_half(a->dtype)) return g_cpu->add(d, a, s);
  float *x = up(a->dtype, a->a, a->n), *y = up(a->dtype, a->b, a->n), *o = scratch(a->n);
  esmtb_add_args f = {sizeof f, ESMTB_F32, a->n, x, y, o};
  esmtb_status st = g_cpu->add(d, &f, s);
  if (!st) down(a->dtype, a->y, o, a->n);
  free(x); free(y); free(o);
  return st;
}

static esmtb_status emu_gelu_bwd(esmtb_device *d, const esmtb_gelu_backward_args *a,
                                 esmtb_stream *s) {
  check_dtype("gelu_backward", a->dtype);
  const size_t es = dsize(a->dtype);
  check("gelu_backward", "pre", a->pre, a->n, es, R_ARENA);
  check("gelu_backward", "dout", a->dout, a->n, es, R_ARENA);
  check("gelu_backward", "dpre", a->dpre, a->n, es, R_ARENA);
  if (!is_half(a->dtype)) return g_cpu->gelu_backward(d, a, s);
  float *pre = up(a->dtype, a->pre, a->n), *dout = up(a->dtype, a->dout, a->n), *o = scratch(a->n);
  esmtb_gelu_backward_args f = {sizeof f, ESMTB_F32, a->n, pre, dout, o};
  esmtb_status st = g_cpu->gelu_backward(d, &f, s);
  if (!st) down(a->dtype, a->dpre, o, a->n);
  free(pre); free(dout); free(o);
  return st;
}

static esmtb_status emu_bias_grad(esmtb_device *d, const esmtb_bias_grad_args *a, esmtb_stream *s) {
  check_dtype("bias_grad", a->dtype);
  const uint64_t n = (uint64_t)a->rows * (uint64_t)a->cols;
  check("bias_grad", "dy", a->dy, n, dsize(a->dtype), R_ARENA);
  check("bias_grad", "db (fp32)", a->db, (uint64_t)a->cols, 4, R_GRAD);
  if (!is_half(a->dtype)) return g_cpu->bias_grad(d, a, s);
  float *dy = up(a->dtype, a->dy, n);
  esmtb_bias_grad_args f = {sizeof f, ESMTB_F32, a->rows, a->cols, dy, a->db};
  esmtb_status st = g_cpu->bias_grad(d, &f, s);
  free(dy);
  return st;
}

static esmtb_status emu_attention(esmtb_device *d, const esmtb_attention_args *a, esmtb_stream *s,
                                  int backward) {
  const char *op = backward ? "attention_backward" : "attention_forward";
  check_dtype(op, a->dtype);
  const size_t es = dsize(a->dtype);
  const uint64_t N = (uint64_t)a->B * a->T, w = (uint64_t)a->H * a->hd;
  const uint64_t tab = (uint64_t)a->T * (uint64_t)(a->hd / 2);
  check(op, "qkv", a->qkv, N * 3 * w, es, R_ARENA);
  check(op, "out", a->out, N * w, es, R_ARENA);
  check(op, "lse", a->lse, N * a->H, 4, R_ARENA);
  check(op, "seq_len", a->seq_len, (uint64_t)a->B, 4, R_ARENA);
  check(op, "rope_cos", a->rope_cos, tab, 4, R_ANY);
  check(op, "rope_sin", a->rope_sin, tab, 4, R_ANY);
  if (backward) {
    if (a->nondeterministic) g_stats.attn_bwd_nondet++;
    check(op, "dout", a->dout, N * w, es, R_ARENA);
    check(op, "dqkv", a->dqkv, N * 3 * w, es, R_ARENA);
  }
  if (!is_half(a->dtype))
    return backward ? g_cpu->attention_backward(d, a, s) : g_cpu->attention_forward(d, a, s);
  esmtb_attention_args f = *a;
  f.dtype = ESMTB_F32;
  float *qkv = up(a->dtype, a->qkv, N * 3 * w);
  float *out = backward ? up(a->dtype, a->out, N * w) : scratch(N * w);
  float *dout = backward ? up(a->dtype, a->dout, N * w) : NULL;
  float *dqkv = backward ? scratch(N * 3 * w) : NULL;
  f.qkv = qkv; f.out = out; f.dout = dout; f.dqkv = dqkv;
  esmtb_status st;
  if (backward) {
    st = g_cpu->attention_backward(d, &f, s);
    if (!st) down(a->dtype, a->dqkv, dqkv, N * 3 * w);
  } else {
    st = g_cpu->attention_forward(d, &f, s);
    if (!st) down(a->dtype, a->out, out, N * w);
  }
  free(qkv); free(out); free(dout); free(dqkv);
  return st;
}
static esmtb_status emu_attn_fwd(esmtb_device *d, const esmtb_attention_args *a, esmtb_stream *s) {
  return emu_attention(d, a, s, 0);
}
static esmtb_status emu_attn_bwd(esmtb_device *d, const esmtb_attention_args *a, esmtb_stream *s) {
  return emu_attention(d, a, s, 1);
}

static esmtb_status emu_xent(esmtb_device *d, const esmtb_xent_args *a, esmtb_stream *s) {
  check_dtype("xent", a->dtype);
  const size_t es = dsize(a->dtype);
  const uint64_t n = (uint64_t)a->N * (uint64_t)a->V;
  check("xent", "logits", a->logits, n, es, R_ARENA);
  check("xent", "labels", a->labels, (uint64_t)a->N, 4, R_ARENA);
  check("xent", "loss_sum (fp32)", a->loss_sum, 1, 4, R_ARENA);
  if (a->dlogits) check("xent", "dlogits", a->dlogits, n, es, R_ARENA);
  if (!is_half(a->dtype)) return g_cpu->xent(d, a, s);
  esmtb_xent_args f = *a;
  f.dtype = ESMTB_F32;
  float *lg = up(a->dtype, a->logits, n), *dl = a->dlogits ? scratch(n) : NULL;
  f.logits = lg;
  f.dlogits = dl;
  esmtb_status st = g_cpu->xent(d, &f, s);
  if (!st && dl) down(a->dtype, a->dlogits, dl, n);
  free(lg); free(dl);
  return st;
}

static esmtb_status emu_adamw(esmtb_device *d, const esmtb_adamw_args *a, esmtb_stream *s) {
  g_stats.ops++;
  if (g_m) {
    if (a->params != g_m->mem.master || a->grads != g_m->mem.grads || a->m != g_m->mem.moment1 ||
        a->v != g_m->mem.moment2)
      problem("adamw: fp32 buffers are not the model's");
    if (a->params_lowp != g_m->mem.compute_lowp ||
        (a->params_lowp && a->lowp_dtype != g_m->dtype))
      problem("adamw: params_lowp %p (dtype %d), the model's is %p (dtype %d)", a->params_lowp,
              (int)a->lowp_dtype, g_m->mem.compute_lowp, (int)g_m->dtype);
    uint64_t covered = 0;
    for (int i = 0; i < a->n_segments; i++) covered += a->segments[i].count;
    if (covered != g_m->layout.total)
      problem("adamw: segments cover %llu of %llu values", (unsigned long long)covered,
              (unsigned long long)g_m->layout.total);
  }
  if (!a->params_lowp || !is_half(a->lowp_dtype)) return g_cpu->adamw(d, a, s);
  /* The cpu adamw writes no half copy: update, then convert each segment. */
  g_stats.adamw_lowp++;
  esmtb_adamw_args f = *a;
  f.params_lowp = NULL;
  f.lowp_dtype = ESMTB_F32;
  esmtb_status st = g_cpu->adamw(d, &f, s);
  for (int i = 0; !st && i < a->n_segments; i++) {
    const esmtb_segment *g = &a->segments[i];
    esmtb_convert_args c = {sizeof c, g->count, a->params + g->offset, ESMTB_F32,
                            (char *)a->params_lowp + g->offset * 2, a->lowp_dtype};
    st = g_cpu->convert(d, &c, s);
  }
  return st;
}

static esmtb_status emu_convert(esmtb_device *d, const esmtb_convert_args *a, esmtb_stream *s) {
  g_stats.converts++;
  if (g_m && g_m->mem.compute_lowp) { /* the only convert the core issues: master -> half copy */
    check("convert", "src", a->src, a->n, 4, R_P32);
    check("convert", "dst", a->dst, a->n, g_m->esize, R_LOWP);
    const uint64_t so = (uint64_t)((const char *)a->src - (const char *)g_m->mem.master) / 4;
    const uint64_t dof = (uint64_t)((const char *)a->dst - (const char *)g_m->mem.compute_lowp) / g_m->esize;
    if (a->src_dtype != ESMTB_F32 || a->dst_dtype != g_m->dtype || so != dof)
      problem("convert: %d -> %d at element %llu -> %llu", (int)a->src_dtype, (int)a->dst_dtype,
              (unsigned long long)so, (unsigned long long)dof);
  } else {
    check("convert", "src", a->src, a->n, dsize(a->src_dtype), R_ANY);
    check("convert", "dst", a->dst, a->n, dsize(a->dst_dtype), R_ANY);
  }
  return g_cpu->convert(d, a, s);
}

const esmtb_ops *half_emu_ops(const esmtb_ops *cpu, uint32_t extra_caps) {
  g_cpu = cpu;
  static test_backend_tables t;
  test_tables_split(cpu, &t);
  t.backend.caps = cpu->caps | extra_caps;
  t.backend.name = "half_emu";
  t.device.alloc = emu_alloc;
  t.device.free = emu_free;
  t.compute.gemm = emu_gemm;
  t.compute.embed_forward = emu_embed_fwd;
  t.compute.embed_backward = emu_embed_bwd;
  t.compute.layernorm_forward = emu_ln_fwd;
  t.compute.layernorm_backward = emu_ln_bwd;
  t.compute.add = emu_add;
  t.compute.gelu_backward = emu_gelu_bwd;
  t.compute.bias_grad = emu_bias_grad;
  t.compute.attention_forward = emu_attn_fwd;
  t.compute.attention_backward = emu_attn_bwd;
  t.compute.xent = emu_xent;
  t.compute.convert = emu_convert;
  t.optimizer.adamw = emu_adamw;
  return test_tables_resolve(&t, &g_ops);
}

void half_emu_watch(const esmt_model *m) { g_m = m; }
half_emu_stats *half_emu_get_stats(void) { return &g_stats; }
void half_emu_reset_stats(void) { memset(&g_stats, 0, sizeof g_stats); }
