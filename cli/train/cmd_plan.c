/* SPDX-License-Identifier: MIT */
/* `esmtrain-example plan`: what a training job needs in device memory,
 * per tensor class, and the policy and micro-batch that fit a budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* 1 when s is a valid size (see esmt_parse_size). */
static int parse_bytes(const char *s, uint64_t *out) { return esmt_parse_size(s, out) == ESMT_OK; }

/* "12.3 ms" below a second, "4.56 s" above. */
static const char *seconds(double s, char buf[32]) {
  if (s < 1) snprintf(buf, 32, "%.1f ms", s * 1e3);
  else snprintf(buf, 32, "%.3g s", s);
  return buf;
}

static int parse_policy(const char *s, int *out) {
  if (!strcmp(s, "auto")) *out = -1;
  else if (!strcmp(s, "on")) *out = 1;
  else if (!strcmp(s, "off")) *out = 0;
  else return 0;
  return 1;
}

/* Per rank at every ZeRO stage, with the micro-batch and recompute of
 * `chosen`: the state on the device, and at stages 1 to 3 each rank's
 * shard of it on its host (optimizer offload), the host figure a rank's
 * and the total of the ranks that share a host. */
static void print_stages(const esmt_plan_request *r, const esmt_plan *chosen) {
  char a[32], b[32], c[32], d[32], e[32];
  const int on_host = r->ranks_per_host > 0 && r->ranks_per_host < r->world_size
                          ? r->ranks_per_host : r->world_size;
  printf("  per rank of %d   %12s %12s %12s %12s %12s  %s\n", r->world_size, "moments",
         "device total", "host/rank", "host/host", "sent/update", "(dist.zero)");
  for (int row = 0; row < 7; row++) {
    static const int zero[] = {0, 1, 1, 2, 2, 3, 3}, offload[] = {-1, 0, 1, 0, 1, 0, 1};
    const int z = zero[row];
    esmt_plan_request q = *r;
    q.zero = z;
    q.micro_batch = chosen->micro_batch;
    q.offload_optimizer = offload[row] < 0 ? chosen->offload_optimizer : offload[row];
    q.recompute = chosen->recompute;
    q.stream = z ? 0 : chosen->stream;
    esmt_plan p = ESMT_PLAN_INIT;
    if (esmt_plan_memory(&q, &p) && !p.device_total) continue; /* an invalid stage here */
    char name[32];
    snprintf(name, sizeof name, "ZeRO-%d%s", z, offload[row] == 1 ? " + offload" : "");
    printf("  %-16s %12s %12s %12s %12s %12s  %s\n", name,
           cli_bytes(p.device[ESMT_MEM_MOMENTS], a, 32), cli_bytes(p.device_total, b, 32),
           cli_bytes(p.host_pinned, c, 32), cli_bytes(p.host_pinned * (uint64_t)on_host, d, 32),
           cli_bytes(p.comm_bytes, e, 32), p.fits ? "fits" : "does not fit");
  }
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example plan [--model NAME] [--micro-batch B] [--seq T]\n"
         "         [--precision fp32|fp16|bf16] [--device-mem BYTES] [--offload auto|on|off]\n"
         "         [--recompute auto|on|off] [--stream auto|off|gradients|weights]\n"
         "         [--runtime-overhead BYTES] [--link GB/s] [--tflops T] [--host-bw GB/s]\n"
         "         [--host-mem BYTES] [--world N] [--zero 0|1|2|3|auto] [--ranks-per-host N]\n"
         "         [--head none|seq-class|multilabel|regression|residue-class]\n"
         "         [--num-labels C] [--frozen-layers N|encoder] [--lora-rank R]\n"
         "         [--lora-targets query,key,value,attention-output,ffn-down,ffn-up]\n"
         "         [--set KEY=VALUE]...\n"
         "Prints the device memory a training job needs per tensor class, and the cheapest\n"
         "policy (none, recompute, optimizer offload, both; then gradients, then weights\n"
         "streamed from host memory, without and with recompute) and micro-batch (0 = largest)\n"
         "that fit --device-mem (e.g. 8GiB). With streaming it prints the bytes that cross the\n"
         "host link per micro-batch. With --tflops (the device's measured GEMM rate) and\n"
         "--link (its measured host link, GB/s; `bench --offload` prints both) it prints\n"
         "the expected time of an update and what transfers add to it, and picks the\n"
         "fastest policy and micro-batch that fit; --host-bw (host memory GB/s) adds the\n"
         "host's gradient sums and optimizer pass. --host-mem (the host memory the job may use) refuses a\n"
         "policy whose offloaded state the host cannot hold. --set takes any configuration\n"
         "key after the flags above\n"
         "--world N plans one of N data-parallel ranks at ZeRO stage --zero (dist.zero) and\n"
         "prints the bytes per rank of every stage (at stages 1 to 3 also with each rank's\n"
         "shard of the optimizer state offloaded to its host) and what each sends per update;\n"
         "--host-mem is one host's memory, shared by --ranks-per-host of the ranks (default all).\n"
         "--zero auto, and --world N > 1 without --zero, plan the lowest stage that fits.\n"
         "(e.g. a custom shape: --set model.num_layers=4 --set model.hidden_size=2560 ...).\n"
         "Fine-tuning: --head, --frozen-layers and --lora-rank (LoRA on --lora-targets,\n"
         "default query,value) plan a model whose frozen weights hold no gradients or\n"
         "moments; --lora-rank or --frozen-layers alone imply --head seq-class (--num-labels 2).\n"
         "Exit status 0 when it fits, 3 when it does not.\n");
}

/* The fine-tuning flags (esmt_model_config's head, frozen and LoRA fields,
 * which have no configuration keys). */
typedef struct finetune_flags {
  int head, num_labels, frozen, lora_rank;
  unsigned targets;
} finetune_flags;

/* esmt_head_kind's values in order. */
static const char *const k_heads[] = {"none", "seq-class", "multilabel", "regression",
                                      "residue-class"};

static int parse_head(const char *v, int *head) {
  for (int i = 0; i < 5; i++)
    if (!strcmp(v, k_heads[i])) return *head = i, 1;
  return 0;
}

/* "query,value" to ESMT_LORA_* bits (1 << the name's index). */
static int parse_targets(const char *v, unsigned *out) {
  static const char *const names[] = {"query", "key", "value", "attention-output", "ffn-down",
                                      "ffn-up"};
  *out = 0;
  for (const char *p = v; *p;) {
    const size_t n = strcspn(p, ",");
    int k = 0;
    while (k < 6 && (strlen(names[k]) != n || strncmp(p, names[k], n))) k++;
    if (k == 6) return 0;
    *out |= 1u << k;
    p += n + (p[n] == ',');
  }
  return *out != 0;
}

/* One fine-tuning flag: 1 taken, 0 a bad value, -1 not one of them. */
static int finetune_flag(const char *a, const char *v, finetune_flags *f) {
  long long x = 0;
  if (!strcmp(a, "--head")) return parse_head(v, &f->head);
  if (!strcmp(a, "--lora-targets")) return parse_targets(v, &f->targets);
  if (!strcmp(a, "--frozen-layers") && !strcmp(v, "encoder"))
    return f->frozen = ESMT_FREEZE_ENCODER, 1;
  if (!strcmp(a, "--num-labels") || !strcmp(a, "--frozen-layers") || !strcmp(a, "--lora-rank")) {
    if (!cli_int_arg("plan", a, v, !strcmp(a, "--num-labels") ? 1 : 0, 1 << 20, &x)) return 0;
    *(!strcmp(a, "--num-labels") ? &f->num_labels : !strcmp(a, "--frozen-layers") ? &f->frozen
                                                                               : &f->lora_rank) =
        (int)x;
    return 1;
  }
  return -1;
}

/* The flags are configuration keys; the request is the one the trainer
 * makes from a configuration (esmt_config_plan_request), for a device
 * backend (the job's GPU, not this machine), except that micro-batch 0 asks
 * for the largest that fits. */
static const struct { const char *flag, *key; } k_flags[] = {
    {"--model", "model.preset"},           {"--seq", "data.max_len"},
    {"--micro-batch", "data.micro_batch"}, {"--precision", "backend.precision"},
    {"--device-mem", "backend.device_memory_limit"}, {"--offload", "offload.optimizer"},
    {"--recompute", "offload.recompute"},  {"--stream", "offload.stream"},
    {"--zero", "dist.zero"},
};

int cmd_plan(int argc, char **argv) {
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  esmt_config *cfg = NULL;
  esmt_status st = esmt_config_create(&cfg);
  if (st) { cli_error("plan", st); return 2; }
  /* plan's own defaults: rows of 512 tokens, the largest micro-batch that fits */
  esmt_config_set(cfg, "data.max_len", "512");
  const char *model = "esm2_t6_8M";
  int have_overhead = 0, rows = 0, n_sets = 0, world = 1, zero_auto = 0, zero_given = 0;
  int ranks_per_host = 0; /* 0: every rank on one host */
  uint64_t host_mem = 0;
  double link_gbps = 0, tflops = 0, host_gbps = 0;
  const char *sets[32];
  finetune_flags ft = {-1, 2, 0, 0, ESMT_LORA_QUERY | ESMT_LORA_VALUE};
  for (int i = 0; i < argc; i += 2) { /* a flag and its value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) { usage(stdout); esmt_config_destroy(cfg); return 0; }
    if (!v) { fprintf(stderr, "plan: %s needs a value (try --help)\n", a); esmt_config_destroy(cfg); return 2; }
    int ok = 1, known = 0;
    const int taken = finetune_flag(a, v, &ft);
    if (taken >= 0) {
      known = 1;
      ok = taken;
    }
    if (!strcmp(a, "--micro-batch") || !strcmp(a, "--seq")) {
      long long x = 0; /* the ranges of data.micro_batch and data.max_len */
      ok = cli_int_arg("plan", a, v, !strcmp(a, "--seq") ? 3 : 0,
                       !strcmp(a, "--seq") ? 65536 : 1 << 20, &x);
      if (!ok) { esmt_config_destroy(cfg); return 2; }
      if (!strcmp(a, "--micro-batch")) rows = (int)x;
    }
    if (!strcmp(a, "--model")) { /* its message suggests the closest preset */
      esmt_model_config probe = ESMT_MODEL_CONFIG_INIT;
      if ((st = esmt_model_config_preset(v, &probe))) {
        cli_error("plan", st);
        esmt_config_destroy(cfg);
        return 2;
      }
      model = v;
    }
    if (!strcmp(a, "--zero")) zero_given = 1;
    if (!strcmp(a, "--zero") && !strcmp(v, "auto")) { /* the planner picks the stage */
      known = 1;
      zero_auto = 1;
    } else if (!strcmp(a, "--world")) {
      known = 1;
      long long x = 0;
      ok = cli_int_arg("plan", a, v, 1, 65536, &x);
      if (!ok) { esmt_config_destroy(cfg); return 2; }
      world = (int)x;
    } else if (!strcmp(a, "--ranks-per-host")) {
      known = 1;
      long long x = 0;
      ok = cli_int_arg("plan", a, v, 1, 65536, &x);
      if (!ok) { esmt_config_destroy(cfg); return 2; }
      ranks_per_host = (int)x;
    } else if (!strcmp(a, "--host-mem")) {
      known = 1;
      ok = parse_bytes(v, &host_mem) && host_mem > 0;
    } else if (!strcmp(a, "--set")) { /* a configuration key, applied after the flags */
      known = 1;
      if (n_sets < (int)(sizeof sets / sizeof sets[0])) sets[n_sets++] = v;
      else ok = 0;
    } else if (!strcmp(a, "--link") || !strcmp(a, "--tflops") || !strcmp(a, "--host-bw")) {
      known = 1;
      ok = cli_double_arg("plan", a, v, 0.001, 100000,
                          !strcmp(a, "--link") ? &link_gbps : !strcmp(a, "--tflops") ? &tflops
                                                                                   : &host_gbps);
      if (!ok) { esmt_config_destroy(cfg); return 2; }
    } else if (!strcmp(a, "--runtime-overhead")) {
      known = 1;
      ok = have_overhead = parse_bytes(v, &r.runtime_overhead);
    } else if (!strcmp(a, "--offload") || !strcmp(a, "--recompute")) {
      int policy;
      ok = parse_policy(v, &policy);
    }
    for (size_t k = 0; ok && !known && k < sizeof k_flags / sizeof k_flags[0]; k++)
      if (!strcmp(a, k_flags[k].flag)) {
        known = 1;
        if (strcmp(a, "--micro-batch") != 0 && (st = esmt_config_set(cfg, k_flags[k].key, v))) {
          fprintf(stderr, "plan: %s: %s\n", a, esmt_last_error());
          esmt_config_destroy(cfg);
          return 2;
        }
      }
    if (ok && !known) {
      fprintf(stderr, "plan: unknown argument '%s'%s (try --help)\n", a, cli_option_hint(a, usage));
      esmt_config_destroy(cfg);
      return 2;
    }
    if (!ok) { fprintf(stderr, "plan: bad value '%s' for %s\n", v, a); esmt_config_destroy(cfg); return 2; }
  }
  for (int i = 0; i < n_sets; i++) {
    char key[128];
    const char *eq = strchr(sets[i], '=');
    if (!eq || eq == sets[i] || (size_t)(eq - sets[i]) >= sizeof key) {
      fprintf(stderr, "plan: --set '%s': expected KEY=VALUE\n", sets[i]);
      esmt_config_destroy(cfg);
      return 2;
    }
    snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
    if (!strcmp(key, "dist.zero")) zero_given = 1;
    if ((st = esmt_config_set(cfg, key, eq + 1))) {
      fprintf(stderr, "plan: --set %s: %s\n", sets[i], esmt_last_error());
      esmt_config_destroy(cfg);
      return 2;
    }
  }
  if (rows > 0) {
    char b[32];
    snprintf(b, sizeof b, "%d", rows);
    esmt_config_set(cfg, "data.micro_batch", b);
  }
  const uint64_t overhead = r.runtime_overhead;
  if (!st) st = esmt_config_validate(cfg);
  if (!st) st = esmt_config_plan_request(cfg, NULL, &mc, &r);
  esmt_config_destroy(cfg);
  if (st) { cli_error("plan", st); return 2; }
  if (rows == 0) r.micro_batch = 0; /* the largest that fits */
  if (ft.head < 0) ft.head = ft.lora_rank || ft.frozen ? ESMT_HEAD_SEQ_CLASS : ESMT_HEAD_NONE;
  mc.head = (esmt_head_kind)ft.head;
  mc.num_labels = ft.head ? ft.num_labels : 0;
  mc.frozen_layers = ft.frozen;
  mc.lora_rank = ft.lora_rank;
  mc.lora_alpha = ft.lora_rank ? 2.0f * (float)ft.lora_rank : 0.0f;
  mc.lora_targets = ft.lora_rank ? ft.targets : 0u;
  if (have_overhead) r.runtime_overhead = overhead;
  r.host_budget = host_mem;
  r.device_flops = tflops * 1e12;
  r.link_bandwidth = link_gbps * 1e9;
  r.host_bandwidth = host_gbps * 1e9;
  r.world_size = world;
  r.ranks_per_host = ranks_per_host;
  /* several ranks and no stage named: the lowest stage that fits */
  if (zero_auto || (world > 1 && !zero_given)) r.zero = -1;
  esmt_plan p = ESMT_PLAN_INIT;
  st = esmt_plan_memory(&r, &p);
  if (st && st != ESMT_ERR_OUT_OF_MEMORY) { cli_error("plan", st); return 2; }
  static const char *const prec[] = {"fp32", "fp16", "bf16"};
  char buf[32];
  printf("plan: %s (%.1fM parameters), micro-batch %d x %d, %s, budget %s\n", model,
         (double)p.parameters / 1e6, p.micro_batch, r.seq_len, prec[r.precision],
         r.device_budget ? cli_bytes(r.device_budget, buf, 32) : "unlimited");
  if (mc.head || mc.frozen_layers || mc.lora_rank)
    printf("  fine-tuning: head %s (%d labels), frozen layers %d, LoRA rank %d (targets 0x%x)\n",
           k_heads[mc.head], mc.num_labels, mc.frozen_layers, mc.lora_rank, mc.lora_targets);
  static const char *const levels[] = {"off", "gradients", "weights"};
  printf("  policy: optimizer offload %s, activation recompute %s, streaming %s\n",
         p.offload_optimizer ? "on" : "off", p.recompute ? "on" : "off", levels[p.stream]);
  for (int i = 0; i < ESMT_MEM_CLASS_COUNT; i++)
    printf("  %-16s %12s\n", esmt_mem_class_name((esmt_mem_class)i),
           cli_bytes(p.device[i], buf, 32));
  printf("  %-16s %12s  (%llu bytes)\n", "device total", cli_bytes(p.device_total, buf, 32),
         (unsigned long long)p.device_total);
  char avail[32], box[96] = "";
  const int on_host = ranks_per_host > 0 && ranks_per_host < world ? ranks_per_host : world;
  if (world > 1) /* the ranks of one host share its memory */
    snprintf(box, sizeof box, " a rank, %s for the %d ranks of a host",
             cli_bytes(p.host_pinned * (uint64_t)on_host, avail, 32), on_host);
  printf("  %-16s %12s%s  (%llu bytes; offload: fp32 master weights, moments, gradients; half: "
         "the weight staging copy%s%s)\n", "host pinned", cli_bytes(p.host_pinned, buf, 32), box,
         (unsigned long long)p.host_pinned, host_mem ? "; available " : "",
         host_mem ? cli_bytes(host_mem, avail, 32) : "");
  if (p.stream) {
    printf("  %-16s %12s  per micro-batch (%s)", "host link", cli_bytes(p.stream_bytes, buf, 32),
           p.stream == ESMT_STREAM_WEIGHTS ? "every layer's weights up twice, its gradients down"
                                           : "every layer's gradients down");
    if (link_gbps > 0)
      printf(": %.1f ms at %.1f GB/s", (double)p.stream_bytes / (link_gbps * 1e9) * 1e3, link_gbps);
    printf("\n");
  }
  if (p.compute_seconds > 0) {
    char tc[32], tl[32], te[32];
    printf("  %-16s %12s  compute per update (%d micro-batch%s at %g TFLOP/s); host link busy "
           "%s; added %s (%.1f%% overhead%s)\n", "expected", seconds(p.compute_seconds, tc),
           p.micro_batches, p.micro_batches == 1 ? "" : "es", tflops, seconds(p.link_seconds, tl),
           seconds(p.exposed_seconds, te), 100.0 * p.exposed_seconds / p.compute_seconds,
           host_gbps > 0 ? "" : "; host passes not counted without --host-bw");
  }
  if (world > 1) print_stages(&r, &p);
  printf("%s: %s\n", p.fits ? "fits" : "DOES NOT FIT", p.advice);
  return p.fits ? 0 : 3;
}
