/* SPDX-License-Identifier: MIT */
/* `esmtrain-example bench`: training steps (forward, backward, AdamW) on
 * synthetic protein-like batches; tokens/s, step split, MFU against a GEMM
 * ceiling measured in the same run, and peak RSS. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"

/* UniProt amino-acid frequencies (%) for ids 4..23: L A G V S E R T I D P K Q N F Y M H W C. */
static const double k_aa_freq[20] = {9.9, 8.3, 7.1, 6.9, 6.6, 6.8, 5.5, 5.3, 5.9, 5.5,
                                     4.7, 5.8, 3.9, 4.1, 3.9, 2.9, 2.4, 2.3, 1.1, 1.4};

static uint64_t next_u64(uint64_t *s) {
  *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
  return *s;
}
static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) / 9007199254740992.0; }

static int32_t sample_residue(uint64_t *s) {
  double r = next_unit(s) * 100.0, acc = 0;
  for (int i = 0; i < 20; i++) {
    acc += k_aa_freq[i];
    if (r < acc) return 4 + i;
  }
  return 4;
}

/* Full-length rows: cls, residues, eos; 15% of residues selected, of those
 * 80% <mask>, 10% a random residue, 10% unchanged (ESM-2's recipe). */
static void synth_batch(int32_t *tok, int32_t *lab, int B, int T, uint64_t *s) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      int32_t *pt = &tok[b * T + t], *pl = &lab[b * T + t];
      *pl = ESMT_LABEL_IGNORE;
      if (t == 0) { *pt = ESMT_TOKEN_CLS; continue; }
      if (t == T - 1) { *pt = ESMT_TOKEN_EOS; continue; }
      *pt = sample_residue(s);
      if (next_unit(s) < 0.15) {
        *pl = *pt;
        double u = next_unit(s);
        if (u < 0.8) *pt = ESMT_TOKEN_MASK;
        else if (u < 0.9) *pt = 4 + (int32_t)(next_u64(s) % 20);
      }
    }
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example bench [--model NAME] [--batch B] [--seq T] [--steps N]\n"
         "                              [--warmup N] [--threads N] [--backend NAME]\n"
         "                              [--precision auto|fp32|fp16|bf16] [--recompute]\n"
         "                              [--nondeterministic] [--offload]\n"
         "                              [--stream gradients|weights] [--device-mem BYTES]\n"
         "                              [--world N]\n"
         "Times training steps on synthetic protein-like batches (defaults: esm2_t6_8M,\n"
         "4 x 512, 5 steps after 1 warm-up, all cores) and prints tokens/s, the split of\n"
         "a step, the GEMM ceiling measured now, MFU against it, and peak RSS.\n"
         "--recompute keeps only each layer's input and re-runs the layer in backward\n"
         "(activation recompute: the memory of 3B at length 1024, at ~1/3 more compute).\n"
         "--nondeterministic lets the backend sum attention gradients with atomics\n"
         "(backend.deterministic false; GPU backends; the last bits vary run to run).\n"
         "--offload keeps master weights and optimizer state in host memory; --stream\n"
         "also streams each layer's gradients (and weights) over the host link as the\n"
         "step runs (offload.stream); both print the link's measured bandwidth and the\n"
         "bytes a step moves over it. --device-mem caps the backend's allocations.\n"
         "--world N prints, for N data-parallel ranks at each ZeRO stage (dist.zero), the\n"
         "bytes an update all-reduces, reduce-scatters and all-gathers (one micro-batch\n"
         "per rank) and what one rank sends of them on a ring.\n");
}

/* The collectives' bytes per update for `world` ranks at each ZeRO stage,
 * by the planner's figures (one micro-batch per rank). */
static esmt_status report_comm(const esmt_model_config *cfg, int B, int T, int world) {
  for (int z = 0; z <= 3; z++) {
    esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
    r.model = cfg;
    r.micro_batch = B;
    r.seq_len = T;
    r.precision = cfg->precision;
    r.offload_optimizer = 0;
    r.recompute = 0;
    r.world_size = world;
    r.zero = z;
    esmt_plan p = ESMT_PLAN_INIT;
    esmt_status st = esmt_plan_memory(&r, &p);
    if (st) return st;
    printf("  comm ZeRO-%d, %d ranks, %llu parameters: per update all-reduced %llu bytes, "
           "reduce-scattered %llu, all-gathered %llu; sent per rank %llu\n", z, world,
           (unsigned long long)p.parameters, (unsigned long long)p.allreduced_bytes,
           (unsigned long long)p.reduce_scattered_bytes,
           (unsigned long long)p.allgathered_bytes, (unsigned long long)p.comm_bytes);
  }
  return ESMT_OK;
}

/* The memory policy's name, as ESMT_RESULT prints it. */
static const char *memory_name(const esmt_memory_policy *mp) {
  return mp->stream == ESMT_STREAM_WEIGHTS     ? "stream-weights"
         : mp->stream == ESMT_STREAM_GRADIENTS ? "stream-gradients"
         : mp->offload_optimizer               ? "offload"
                                               : "resident";
}

/* Under offload: the host link measured now, and what a step moves over
 * it by the plan (streamed layers per micro-batch; the update's gradients
 * down and weights up): the time that takes at the measured speed, beside
 * the step's. *h2d receives the measured bandwidth (0 when not measured). */
static esmt_status report_link(esmt_context *ctx, const esmt_model_config *cfg,
                               const esmt_memory_policy *mp, int B, int T, double step_s,
                               double *h2d) {
  *h2d = 0;
  if (!mp->offload_optimizer) return ESMT_OK;
  double d2h = 0;
  esmt_status st = esmt_context_copy_bandwidth(ctx, 64ull << 20, 3, h2d, &d2h);
  if (st) return st;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = cfg;
  r.micro_batch = B;
  r.seq_len = T;
  r.precision = cfg->precision;
  r.offload_optimizer = 1;
  r.recompute = mp->recompute;
  r.stream = mp->stream;
  esmt_plan p = ESMT_PLAN_INIT;
  if ((st = esmt_plan_memory(&r, &p))) return st;
  /* an update: each micro-batch's streamed bytes, then the fp32 gradients
   * down and the compute weights up (the optimizer's host side) */
  const double es = cfg->precision == ESMT_PRECISION_FP32 ? 4 : 2;
  const double update_bytes = (double)p.stream_bytes + (double)p.parameters * (4 + es);
  printf("host link %.2f GB/s up, %.2f GB/s down (64 MiB pinned copies) | %.0f MiB a step "
         "over it: %.1f ms at the slower, beside a %.1f ms step\n", *h2d / 1e9, d2h / 1e9,
         update_bytes / 1048576.0, update_bytes / (*h2d < d2h ? *h2d : d2h) * 1e3, step_s * 1e3);
  return ESMT_OK;
}

int cmd_bench(int argc, char **argv) {
  const char *model = "esm2_t6_8M", *backend = NULL, *precision = "auto";
  esmt_status st = ESMT_OK;
  int B = 4, T = 512, steps = 5, warmup = 1, threads = 0, recompute = 0, nondet = 0, world = 1;
  esmt_memory_policy mp = ESMT_MEMORY_POLICY_INIT;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) { usage(stdout); return 0; }
    if (!strcmp(a, "--recompute")) { recompute = 1; continue; }
    if (!strcmp(a, "--nondeterministic")) { nondet = 1; continue; }
    if (!strcmp(a, "--offload")) { mp.offload_optimizer = 1; continue; }
    if (!v) { fprintf(stderr, "bench: %s needs a value (try --help)\n", a); return 2; }
    if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--backend")) backend = v;
    else if (!strcmp(a, "--batch") || !strcmp(a, "--seq") || !strcmp(a, "--steps") ||
             !strcmp(a, "--warmup") || !strcmp(a, "--threads") || !strcmp(a, "--world")) {
      long long x = 0;
      if (!cli_int_arg("bench", a, v, 0, 1 << 20, &x)) return 2;
      *(!strcmp(a, "--batch") ? &B : !strcmp(a, "--seq") ? &T : !strcmp(a, "--steps") ? &steps
        : !strcmp(a, "--warmup") ? &warmup : !strcmp(a, "--world") ? &world : &threads) = (int)x;
    }
    else if (!strcmp(a, "--precision")) precision = v;
    else if (!strcmp(a, "--stream")) {
      mp.stream = !strcmp(v, "gradients") ? ESMT_STREAM_GRADIENTS
                : !strcmp(v, "weights")   ? ESMT_STREAM_WEIGHTS : ESMT_STREAM_NONE;
      if (!mp.stream) {
        fprintf(stderr, "bench: --stream '%s': expected gradients or weights\n", v);
        return 2;
      }
      mp.offload_optimizer = 1; /* streaming sits on the optimizer's host side */
    } else if (!strcmp(a, "--device-mem")) {
      if ((st = esmt_parse_size(v, &mp.device_memory_limit))) { cli_error("bench", st); return 2; }
    }
    else {
      fprintf(stderr, "bench: unknown argument '%s'%s (try --help)\n", a, cli_option_hint(a, usage));
      return 2;
    }
    i++;
  }
  if (B < 1 || T < 3 || steps < 1 || warmup < 0 || threads < 0) {
    fprintf(stderr, "bench: need --batch >= 1, --seq >= 3, --steps >= 1\n");
    return 2;
  }
  esmt_model_config cfg = ESMT_MODEL_CONFIG_INIT;
  st = esmt_model_config_preset(model, &cfg);
  if (st) { cli_error("bench", st); return 2; }
  if (T > cfg.max_positions) cfg.max_positions = T;
  if (!strcmp(precision, "fp32")) cfg.precision = ESMT_PRECISION_FP32;
  else if (!strcmp(precision, "fp16")) cfg.precision = ESMT_PRECISION_FP16;
  else if (!strcmp(precision, "bf16")) cfg.precision = ESMT_PRECISION_BF16;
  else if (strcmp(precision, "auto")) {
    fprintf(stderr, "bench: --precision '%s': expected auto, fp32, fp16 or bf16\n", precision);
    return 2;
  }

  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend = backend;
  o.num_threads = threads;
  o.log = cli_log_stderr;
  o.log_level = ESMT_LOG_INFO; /* includes the per-op profile when $ESMT_PROFILE=1 */
  esmt_context *ctx = NULL;
  esmt_model *m = NULL;
  if ((st = esmt_context_create(&o, &ctx))) { cli_error("bench", st); return 1; }
  /* The ceiling is the best of runs before and after the steps: on a
   * shared machine one short measurement can read low, which would flatter
   * the MFU figure. */
  double ceiling = 0, ceiling_after = 0;
  mp.recompute = recompute;
  if ((st = esmt_model_create_with_memory(ctx, &cfg, 1, &mp, &m))) goto fail;
  if (nondet && (st = esmt_model_set_deterministic(m, 0))) goto fail;
  esmt_model_get_config(m, &cfg); /* the precision actually chosen */
  /* at the model's FFN-up GEMM, as the trainer measures it: a fixed 2048^3
   * product leaves an H100 launch-bound and reads low */
  if ((st = esmt_model_gemm_ceiling(m, (int64_t)B * T, 6, &ceiling))) goto fail;

  int32_t *tok = malloc((size_t)B * T * sizeof *tok), *lab = malloc((size_t)B * T * sizeof *lab);
  if (!tok || !lab) { fprintf(stderr, "bench: out of memory\n"); return 1; }
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  esmt_optimizer_config ac = ESMT_OPTIMIZER_CONFIG_INIT;
  double ac_lr = 4e-4; /* the learning rate is the step's argument */
  double t_fwd = 0, t_bwd = 0, t_opt = 0, t_all = 0;
  uint64_t tokens = 0;
  static const char *const k_prec[] = {"fp32", "fp16", "bf16", "auto"};
  printf("bench: %s (%d layers, d=%d, %d heads), batch %d x %d, backend %s, %s%s%s\n", model,
         cfg.num_layers, cfg.hidden_size, cfg.num_heads, B, T, esmt_context_backend_name(ctx),
         k_prec[cfg.precision & 3], recompute ? ", activation recompute" : "",
         nondet ? ", non-deterministic backward" : "");
  if (mp.offload_optimizer) printf("  memory: %s\n", memory_name(&mp));
  if (world > 1 && (st = report_comm(&cfg, B, T, world))) goto fail;
  for (int s = 0; s < warmup + steps; s++) {
    synth_batch(tok, lab, B, T, &seed);
    esmt_batch b = ESMT_BATCH_INIT;
    b.batch = B; b.seq_len = T; b.tokens = tok; b.labels = lab;
    esmt_forward_result r = ESMT_FORWARD_RESULT_INIT;
    double t0 = esmt_clock_seconds();
    if ((st = esmt_model_zero_grad(m))) goto fail;
    if ((st = esmt_model_forward(m, &b, &r, NULL))) goto fail;
    double t1 = esmt_clock_seconds();
    if ((st = esmt_model_backward(m))) goto fail;
    double t2 = esmt_clock_seconds();
    if ((st = esmt_model_optimizer_step(m, &ac, ac_lr, 1.0, s + 1))) goto fail;
    double t3 = esmt_clock_seconds();
    printf("  step %d%s: loss %.4f, %.0f ms\n", s + 1, s < warmup ? " (warm-up)" : "", r.loss,
           (t3 - t0) * 1e3);
    if (s < warmup) continue;
    t_fwd += t1 - t0; t_bwd += t2 - t1; t_opt += t3 - t2; t_all += t3 - t0;
    tokens += r.real_tokens;
  }
  if ((st = esmt_model_gemm_ceiling(m, (int64_t)B * T, 6, &ceiling_after))) goto fail;
  if (ceiling_after > ceiling) ceiling = ceiling_after;
  double tps = (double)tokens / t_all;
  double flops = 0;
  esmt_model_train_flops(&cfg, B, T, &flops);
  double achieved = flops * steps / t_all / 1e9;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  /* the split is host time: on a GPU the work is asynchronous and the
   * forward's loss readout waits for the previous step; the total is exact */
  printf("tokens/s %.0f | step %.1f ms (host time: forward %.1f + backward %.1f + optimizer %.1f "
         "ms)\n",
         tps, 1e3 * t_all / steps, 1e3 * t_fwd / steps, 1e3 * t_bwd / steps, 1e3 * t_opt / steps);
  printf("model %.1f GFLOP/s, GEMM ceiling %.1f GFLOP/s, MFU %.1f%% | peak RSS %.0f MiB\n",
         achieved, ceiling, 100.0 * achieved / ceiling, ru.ru_maxrss / 1024.0);
  double link = 0;
  if ((st = report_link(ctx, &cfg, &mp, B, T, t_all / steps, &link))) goto fail;
  printf("ESMT_RESULT model=%s batch=%d seq=%d threads=%d tokens_per_s=%.1f step_ms=%.2f "
         "mfu=%.4f ceiling_gflops=%.1f memory=%s link_gbps=%.2f\n", model, B, T, threads, tps,
         1e3 * t_all / steps, achieved / ceiling, ceiling, memory_name(&mp), link / 1e9);
  free(tok);
  free(lab);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return 0;
fail:
  cli_error("bench", st);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return 1;
}
