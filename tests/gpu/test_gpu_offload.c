/* SPDX-License-Identifier: MIT */
/* Optimizer offload and the streamed levels on a GPU backend (issues #7,
 * #36): what CI cannot check on a GPU, and checks under the emulator.
 *
 *   test_gpu_offload                 correctness: a small model trained
 *                                    resident, with optimizer offload, with
 *                                    gradients streamed and with weights
 *                                    streamed (AdamW and Lion, recompute off
 *                                    and on, two micro-batches an update, an
 *                                    overflow injected, packed rows) must
 *                                    agree; exits 77
 *                                    without a GPU backend
 *   test_gpu_offload --model esm2_t36_3B --batch 16 --seq 512 --micro 8
 *                    --stream weights --device-limit 8GiB --precision fp16
 *                                    the streamed level's tokens/s beside the
 *                                    resident run at the same shape and update
 *                                    (issue #36's bar: >= 0.70 at ~2M tokens an
 *                                    update), with recompute, and the host
 *                                    link's H2D/D2H bandwidth measured on
 *                                    pinned memory
 *   test_gpu_offload --mutant weights|gradients|host-sums
 *                                    the same with one of the stream layer's
 *                                    waits dropped (tests/gpu/emu/mutants.sh:
 *                                    the emulator's checkers must report it;
 *                                    host-sums: the host's sum reads a bounce
 *                                    buffer before its copy lands)
 *   test_gpu_offload --model esm2_t33_650M --batch 6 --seq 512 [--micro 2]
 *                    [--updates 5] [--precision fp16|bf16]
 *                                    adds the measurement: tokens/s with and
 *                                    without offload at the same shape (the
 *                                    issue's bar: >= 70%), and the peak device
 *                                    memory of each (total - free from
 *                                    mem_info, so the CUDA context, cuBLAS and
 *                                    the allocator's slack are included; the
 *                                    650M 6x512 budget is 8 GiB)
 *
 * $ESMT_OFFLOAD_BACKEND names the backend (default: the best non-cpu one);
 * `cpu` runs the harness here, where the two runs must be bit-identical.
 * Prints RESULT lines; docs/gpu-measurements.md takes the figures. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context.h"
#include "host_sums.h"
#include "stream.h"
#include "trainer_update.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void log_stderr(void *u, esmt_log_level l, const char *msg) {
  (void)u;
  if (l >= ESMT_LOG_INFO) fprintf(stderr, "  log: %s\n", msg);
}

typedef struct shape {
  int B, T, micro, updates;
  int packed; /* 1: two proteins a row (packed segments), else right-padded rows */
} shape;

/* Micro-batch k of update u: full rows with ~15% masked positions. */
static void fill(esmt_micro_batch *mb, const shape *s, int u, int k, int32_t *tok, int32_t *lab) {
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(u * 131 + k);
  for (int i = 0; i < s->B * s->T; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    int t = i % s->T, len = s->T - (i / s->T) % 4;
    int res = 4 + (int)(x % 20);
    tok[i] = t >= len ? ESMT_TOKEN_PAD : t == 0 ? ESMT_TOKEN_CLS : res;
    lab[i] = ESMT_LABEL_IGNORE;
    if (t > 0 && t < len && (x >> 20) % 100 < 15) {
      lab[i] = res;
      tok[i] = ESMT_TOKEN_MASK;
    }
  }
  mb->B = s->B;
  mb->T = s->T;
  mb->tokens = tok;
  mb->labels = lab;
  mb->nseg = 0;
  if (s->packed) { /* row r: [0, T/2) and [T/2, len), each starting with <cls> */
    for (int r = 0; r < s->B; r++) {
      const int h = s->T / 2, len = s->T - r % 4;
      tok[r * s->T + h] = ESMT_TOKEN_CLS;
      lab[r * s->T + h] = ESMT_LABEL_IGNORE;
      mb->seg_start[2 * r] = r * s->T;
      mb->seg_len[2 * r] = h;
      mb->seg_start[2 * r + 1] = r * s->T + h;
      mb->seg_len[2 * r + 1] = len - h;
    }
    mb->nseg = 2 * s->B;
  }
  esmt_micro_batch_count(mb);
}

typedef struct run_result {
  double loss[64];
  double seconds;            /* updates after the first */
  uint64_t tokens;
  uint64_t peak_used;        /* device total - free, largest seen */
  uint64_t host_bytes;
} run_result;

/* The memory levels: resident, optimizer offload, gradients streamed,
 * weights streamed. */
enum { RESIDENT = -1, OFFLOAD = 0 };
static const char *level_name(int level) {
  return level == RESIDENT ? "resident" : level == OFFLOAD ? "offload"
       : level == ESMT_STREAM_GRADIENTS ? "stream-gradients" : "stream-weights";
}

/* The device budget of the measured streamed run (--device-limit; 0: none). */
static uint64_t g_device_limit;

static int train_at(esmt_context *ctx, const esmt_model_config *cfg, const shape *s, int level,
                    int recompute, float **params_out, run_result *r) {
  memset(r, 0, sizeof *r);
  const int offload = level >= OFFLOAD;
  esmt_offload_options oo = {.enabled = offload, .recompute = recompute,
                             .streamed = level > 0 ? level : ESMT_STREAM_NONE,
                             .device_memory_limit = level > 0 ? g_device_limit : 0};
  esmt_model *m = NULL;
  if (esmt_model_create_with(ctx, cfg, 5, &oo, &m) != ESMT_OK) {
    fprintf(stderr, "create (%s): %s\n", level_name(level), esmt_last_error());
    return 1;
  }
  if (m->mem.offload) r->host_bytes = m->mem.offload->pinned_bytes + m->mem.offload->pageable_bytes;
  esmt_update_params p;
  memset(&p, 0, sizeof p);
  esmt_optimizer_config ac;
  esmt_optimizer_config_init(cfg->optimizer, &ac);
  esmt_schedule sc = ESMT_SCHEDULE_INIT;
  sc.warmup_steps = 2;
  sc.total_steps = 500000;
  sc.peak_lr = cfg->optimizer == ESMT_OPTIMIZER_LION ? 1e-4 : 1e-3;
  p.optimizer = ac;
  p.schedule = sc;
  p.grad_clip = 1.0;
  p.loss_scale = m->dtype == ESMTB_F16 ? 1024.0 : 1.0;
  p.scaling = m->dtype == ESMTB_F16;
  const size_t n = (size_t)s->B * s->T;
  int32_t *tok = malloc(n * s->micro * sizeof *tok), *lab = malloc(n * s->micro * sizeof *lab);
  esmt_micro_batch *mbs = calloc((size_t)s->micro, sizeof *mbs);
  int32_t *segs = malloc((size_t)s->micro * 4 * (size_t)s->B * sizeof *segs);
  int rc = !tok || !lab || !mbs || !segs;
  for (int k = 0; !rc && k < s->micro; k++) { /* room for two segments a row */
    mbs[k].seg_start = segs + (size_t)k * 4 * s->B;
    mbs[k].seg_len = mbs[k].seg_start + 2 * s->B;
    mbs[k].seg_cap = 2 * s->B;
  }
  double t0 = 0;
  for (int u = 1; u <= s->updates && !rc; u++) {
    if (u == 2) t0 = now_s();
    for (int k = 0; k < s->micro; k++) fill(&mbs[k], s, u, k, tok + k * n, lab + k * n);
    esmt_update_result ur;
    if (esmt_run_update(m, mbs, s->micro, &p, u, u, &ur) != ESMT_OK) {
      fprintf(stderr, "update %d (%s): %s\n", u, level_name(level), esmt_last_error());
      rc = 1;
      break;
    }
    if (u < 64) r->loss[u - 1] = ur.skipped ? -1.0 : ur.loss; /* a skipped update: marked */
    if (u >= 2) r->tokens += ur.real_tokens;
    uint64_t fr = 0, tot = 0;
    if (m->ops->mem_info && m->ops->mem_info(m->dev, &fr, &tot) == 0 && tot - fr > r->peak_used)
      r->peak_used = tot - fr;
  }
  if (!rc) r->seconds = now_s() - t0;
  if (!rc && params_out) {
    *params_out = malloc(m->layout.total * sizeof(float));
    if (!*params_out || esmt_master_copy(m, *params_out, m->mem.master,
                                         m->layout.total * sizeof(float), 0) != ESMT_OK)
      rc = 1;
  }
  free(tok);
  free(lab);
  free(mbs);
  free(segs);
  esmt_model_destroy(m);
  return rc;
}

static int train(esmt_context *ctx, const esmt_model_config *cfg, const shape *s, int offload,
                 float **params_out, run_result *r) {
  return train_at(ctx, cfg, s, offload ? OFFLOAD : RESIDENT, 0, params_out, r);
}

/* Relative L2 distance of two weight vectors, and the worst relative loss
 * gap of two runs (a skipped update must be skipped by both). */
static double weights_gap(const float *a, const float *b, uint64_t n) {
  double dd = 0, nn = 0;
  for (uint64_t i = 0; i < n; i++) {
    dd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    nn += (double)a[i] * a[i];
  }
  return sqrt(dd / nn);
}

static double loss_gap(const run_result *a, const run_result *b, int updates) {
  double worst = 0;
  for (int u = 0; u < updates; u++) {
    if ((a->loss[u] < 0) != (b->loss[u] < 0)) return INFINITY;
    double e = a->loss[u] < 0 ? 0 : fabs(a->loss[u] - b->loss[u]) / fabs(a->loss[u]);
    if (e > worst) worst = e;
  }
  return worst;
}

/* Every level against the resident run, one configuration. `exact`: the
 * cpu backend, where one micro-batch an update is bit for bit. */
static int levels_agree(esmt_context *ctx, const char *backend, const esmt_model_config *c,
                        const shape *s, int recompute, const char *what, double wtol, int exact) {
  run_result ref, r;
  float *pref = NULL, *p = NULL;
  if (train_at(ctx, c, s, RESIDENT, recompute, &pref, &ref)) return 1;
  uint64_t P = 0;
  esmt_model_config_param_count(c, &P);
  int fails = 0;
  for (int level = ESMT_STREAM_GRADIENTS; level <= ESMT_STREAM_WEIGHTS; level++) {
    if (train_at(ctx, c, s, level, recompute, &p, &r)) return 1;
    const double werr = weights_gap(pref, p, P), lerr = loss_gap(&ref, &r, s->updates);
    const int ok = exact && s->micro == 1 ? werr == 0 && lerr == 0 : werr < wtol && lerr < 1e-3;
    printf("RESULT stream_agreement backend=%s level=%s %s updates=%d micro=%d recompute=%d "
           "weights_rel_l2=%.3e worst_loss_rel=%.3e %s\n", backend, level_name(level), what,
           s->updates, s->micro, recompute, werr, lerr, ok ? "ok" : "FAIL");
    fails += !ok;
    free(p);
    p = NULL;
  }
  free(pref);
  return fails;
}

/* H2D and D2H GB/s between pinned host memory and the device: 256 MiB,
 * best of 5 copies each. */
static int copy_bandwidth(esmt_context *ctx, double *h2d, double *d2h) {
  const esmtb_ops *ops = ctx->backend->ops;
  esmtb_open_options oo = {sizeof oo, 0, ctx->num_threads, 0};
  esmtb_device *dev = NULL;
  void *host = NULL, *devbuf = NULL;
  const size_t bytes = 256u << 20;
  int rc = ops->open(&oo, &dev) || ops->alloc(dev, ESMTB_MEM_PINNED_HOST, bytes, &host) ||
           ops->alloc(dev, ESMTB_MEM_DEVICE, bytes, &devbuf);
  *h2d = *d2h = 0;
  for (int dir = 0; dir < 2 && !rc; dir++)
    for (int i = 0; i < 5 && !rc; i++) {
      const double t0 = now_s();
      rc = dir ? ops->copy_async(dev, host, devbuf, bytes, ESMTB_COPY_D2H, NULL)
               : ops->copy_async(dev, devbuf, host, bytes, ESMTB_COPY_H2D, NULL);
      rc = rc || ops->stream_sync(dev, NULL);
      const double gbps = (double)bytes / (now_s() - t0) / 1e9;
      double *best = dir ? d2h : h2d;
      if (gbps > *best) *best = gbps;
    }
  if (devbuf) ops->free(dev, ESMTB_MEM_DEVICE, devbuf);
  if (host) ops->free(dev, ESMTB_MEM_PINNED_HOST, host);
  if (dev) ops->close(dev);
  return rc;
}

static const char *pick_backend(esmt_context *ctx) {
  const char *want = getenv("ESMT_OFFLOAD_BACKEND");
  if (want && *want) return want;
  const char *best = NULL;
  int score = 0;
  for (int i = 0; i < ctx->registry.count; i++) {
    const esmt_backend_entry *e = &ctx->registry.entries[i];
    if (e->loaded && e->probe.available && strcmp(e->name, "cpu") && e->score > score &&
        !(e->ops->caps & ESMTB_CAP_MULTI_DEVICE)) {
      best = e->name;
      score = e->score;
    }
  }
  return best;
}

/* 1. Optimizer offload against the resident run on a small model. */
static int offload_agrees(esmt_context *ctx, const char *chosen, const esmt_model_config *c,
                          esmt_precision pr, int exact) {
  shape small = {4, 64, 2, 5, 0};
  run_result a, b;
  float *pa = NULL, *pb = NULL;
  if (train(ctx, c, &small, 0, &pa, &a) || train(ctx, c, &small, 1, &pb, &b)) return 1;
  uint64_t P = 0;
  esmt_model_config_param_count(c, &P);
  double dd = 0, nn = 0, worst_loss = 0;
  for (uint64_t i = 0; i < P; i++) {
    dd += ((double)pa[i] - pb[i]) * ((double)pa[i] - pb[i]);
    nn += (double)pa[i] * pa[i];
  }
  for (int u = 0; u < small.updates; u++) {
    double e = fabs(a.loss[u] - b.loss[u]) / fabs(a.loss[u]);
    if (e > worst_loss) worst_loss = e;
  }
  const double werr = sqrt(dd / nn);
  /* Device and host AdamW/norm are both fp32; only rounding may differ. In
   * bf16/fp16 compute (AUTO on a GPU) a last-bit difference of a master
   * weight flips the rounding of its half copy now and then, and training
   * carries that on: measured under the emulator on ampere_bf16, 5 updates,
   * weights 1.9e-4 apart, losses 3.9e-5 (a bf16 ulp is 3.9e-3). */
  const double wtol = pr == ESMT_PRECISION_FP32 ? 1e-4 : 2e-3;
  const int ok = exact ? (dd == 0 && worst_loss == 0) : (werr < wtol && worst_loss < 1e-3);
  printf("RESULT offload_agreement backend=%s weights_rel_l2=%.3e worst_loss_rel=%.3e %s\n",
         chosen, werr, worst_loss, ok ? "ok" : "FAIL");
  free(pa);
  free(pb);
  return !ok;
}

int main(int argc, char **argv) {
  const char *model = NULL, *prec = NULL;
  shape big = {6, 512, 2, 5, 0};
  int stream_level = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mutant")) {
      if (!strcmp(argv[i + 1], "weights")) esmt_test_stream_drop_weight_wait = 1;
      else if (!strcmp(argv[i + 1], "gradients")) esmt_test_stream_drop_grad_wait = 1;
      else if (!strcmp(argv[i + 1], "host-sums")) esmt_test_host_sums_drop_copy_wait = 1;
      else { fprintf(stderr, "--mutant weights|gradients|host-sums\n"); return 2; }
    } else if (!strcmp(argv[i], "--stream")) {
      stream_level = !strcmp(argv[i + 1], "weights") ? ESMT_STREAM_WEIGHTS
                   : !strcmp(argv[i + 1], "gradients") ? ESMT_STREAM_GRADIENTS : -1;
      if (stream_level < 0) { fprintf(stderr, "--stream weights|gradients\n"); return 2; }
    } else if (!strcmp(argv[i], "--device-limit")) {
      if (esmt_parse_size(argv[i + 1], &g_device_limit) != ESMT_OK) {
        fprintf(stderr, "--device-limit: %s\n", esmt_last_error());
        return 2;
      }
    } else if (!strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!strcmp(argv[i], "--batch")) big.B = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seq")) big.T = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--micro")) big.micro = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--updates")) big.updates = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--precision")) prec = argv[i + 1];
    else { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
  }
  if (big.B < 1 || big.T < 3 || big.micro < 1 || big.updates < 2 || big.updates > 60) {
    fprintf(stderr, "need --batch >= 1, --seq >= 3, --micro >= 1, 2 <= --updates <= 60\n");
    return 2;
  }
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = getenv("ESMT_TEST_BACKEND_DIR");
  o.log = log_stderr;
  o.log_level = ESMT_LOG_INFO;
  esmt_context *probe = NULL;
  if (esmt_context_create(&o, &probe) != ESMT_OK) {
    printf("SKIP: %s\n", esmt_last_error());
    return 77;
  }
  const char *name = pick_backend(probe);
  char chosen[64];
  snprintf(chosen, sizeof chosen, "%s", name ? name : "");
  esmt_context_destroy(probe);
  if (!chosen[0]) {
    printf("SKIP: no GPU backend is available here (ESMT_OFFLOAD_BACKEND=cpu runs the harness)\n");
    return 77;
  }
  o.backend = chosen;
  esmt_context *ctx = NULL;
  if (esmt_context_create(&o, &ctx) != ESMT_OK) {
    printf("SKIP: %s\n", esmt_last_error());
    return 77;
  }
  const int exact = strcmp(chosen, "cpu") == 0;
  esmt_precision pr = !prec ? ESMT_PRECISION_AUTO
                    : !strcmp(prec, "fp16") ? ESMT_PRECISION_FP16
                    : !strcmp(prec, "bf16") ? ESMT_PRECISION_BF16 : ESMT_PRECISION_FP32;
  int fails = 0;

  /* the small model of the agreement checks */
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 3;
  c.hidden_size = 64;
  c.num_heads = 4;
  c.max_positions = 128;
  c.precision = pr;
  /* A mutant needs only the streamed run that drops the wait, and only
   * until the emulator reports: the offload agreement and the later cases
   * are skipped, and the updates cut to 3. */
  const int mutant = esmt_test_stream_drop_weight_wait || esmt_test_stream_drop_grad_wait ||
                     esmt_test_host_sums_drop_copy_wait;
  if (!mutant) fails += offload_agrees(ctx, chosen, &c, pr, exact);

  /* 2. the streamed levels against the resident run: 20 updates of two
   * micro-batches (AdamW), 20 of two with recompute and Lion, and one
   * overflow: the device (or the fault hook) makes update 3's gradients
   * non-finite, which every level must skip alike. fp16 (turing_fp16)
   * scales the loss. The Lion runs pack two proteins a row. */
  shape st = {2, 32, 2, mutant ? 3 : 20, 0};
  const double stol = pr == ESMT_PRECISION_FP32 ? 1e-4 : 5e-3;
  esmt_test_inject_nan_step = 3;
  esmt_test_inject_nan_count = 1;
  fails += levels_agree(ctx, chosen, &c, &st, 0, "adamw", stol, exact);
  esmt_test_inject_nan_step = 0;
  esmt_test_inject_nan_count = 0;
  if (mutant) {
    esmt_context_destroy(ctx);
    return fails ? 1 : 0;
  }
  /* packed rows (two proteins a row) where the backend takes them */
  const int packs = esmt_packing_supported(ctx->backend->ops) == ESMT_OK;
  if (!packs) esmt_clear_error();
  esmt_model_config lion = c;
  lion.optimizer = ESMT_OPTIMIZER_LION;
  shape lst = st;
  lst.packed = packs;
  fails += levels_agree(ctx, chosen, &lion, &lst, 1, packs ? "lion-packed" : "lion", stol, exact);
  shape one = {2, 32, 1, 6, 0};
  fails += levels_agree(ctx, chosen, &c, &one, 0, "adamw", stol, exact);

  /* 3. the measurement at a real shape */
  if (model) {
    esmt_model_config m = ESMT_MODEL_CONFIG_INIT;
    if (esmt_model_config_preset(model, &m) != ESMT_OK) {
      fprintf(stderr, "%s\n", esmt_last_error());
      return 2;
    }
    m.precision = pr;
    run_result off, on;
    if (stream_level) { /* the streamed level against the resident run, both with recompute */
      double h2d = 0, d2h = 0;
      if (copy_bandwidth(ctx, &h2d, &d2h)) printf("RESULT copy_bandwidth failed: %s\n", esmt_last_error());
      else printf("RESULT copy_bandwidth backend=%s h2d_GBps=%.1f d2h_GBps=%.1f (pinned, 256 MiB)\n",
                  chosen, h2d, d2h);
      if (train_at(ctx, &m, &big, RESIDENT, 1, NULL, &off)) {
        printf("RESULT stream_resident model=%s failed: %s\n", model, esmt_last_error());
        memset(&off, 0, sizeof off);
      }
      if (train_at(ctx, &m, &big, stream_level, 1, NULL, &on)) return 1;
      const double tps_off = off.seconds > 0 ? (double)off.tokens / off.seconds : 0;
      const double tps_on = (double)on.tokens / on.seconds;
      printf("RESULT stream_throughput model=%s level=%s batch=%dx%d micro=%d limit=%.1fGiB "
             "tokens_per_s_resident=%.0f tokens_per_s_streamed=%.0f ratio=%.3f (issue #36: >= "
             "0.70 at ~2M tokens an update) peak_device_streamed=%.2fGiB host_ram=%.2fGiB\n",
             model, level_name(stream_level), big.B, big.T, big.micro,
             (double)g_device_limit / 1073741824.0, tps_off, tps_on, tps_off > 0 ? tps_on / tps_off : 0,
             (double)on.peak_used / 1073741824.0, (double)on.host_bytes / 1073741824.0);
      esmt_context_destroy(ctx);
      return fails ? 1 : 0;
    }
    if (train(ctx, &m, &big, 0, NULL, &off)) {
      printf("RESULT offload_off model=%s failed: %s\n", model, esmt_last_error());
      memset(&off, 0, sizeof off);
    }
    if (train(ctx, &m, &big, 1, NULL, &on)) return 1;
    const double tps_off = off.seconds > 0 ? (double)off.tokens / off.seconds : 0;
    const double tps_on = (double)on.tokens / on.seconds;
    printf("RESULT offload_throughput model=%s batch=%dx%d micro=%d tokens_per_s_off=%.0f "
           "tokens_per_s_on=%.0f ratio=%.3f (issue #7: >= 0.70)\n", model, big.B, big.T,
           big.micro, tps_off, tps_on, tps_off > 0 ? tps_on / tps_off : 0);
    printf("RESULT offload_memory model=%s peak_device_used_off=%.2fGiB peak_device_used_on="
           "%.2fGiB host_ram_on=%.2fGiB (650M 6x512 budget: 8 GiB)\n", model,
           (double)off.peak_used / 1073741824.0, (double)on.peak_used / 1073741824.0,
           (double)on.host_bytes / 1073741824.0);
  }
  esmt_context_destroy(ctx);
  return fails ? 1 : 0;
}
