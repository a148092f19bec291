/* `esmtrain-example plan`: what a training job needs in device memory,
 * per tensor class, and the policy and micro-batch that fit a budget. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* 1 when s is a valid size (see esmt_parse_size). */
static int parse_bytes(const char *s, uint64_t *out) { return esmt_parse_size(s, out) == ESMT_OK; }

static int parse_policy(const char *s, int *out) {
  if (!strcmp(s, "auto")) *out = -1;
  else if (!strcmp(s, "on")) *out = 1;
  else if (!strcmp(s, "off")) *out = 0;
  else return 0;
  return 1;
}

static void usage(void) {
  printf("usage: esmtrain-example plan [--model NAME] [--micro-batch B] [--seq T]\n"
         "         [--precision fp32|fp16|bf16] [--device-mem BYTES] [--offload auto|on|off]\n"
         "         [--recompute auto|on|off] [--runtime-overhead BYTES]\n"
         "Prints the device memory a training job needs per tensor class, and the cheapest\n"
         "policy (none, recompute, optimizer offload, both) and micro-batch (0 = largest)\n"
         "that fit --device-mem (e.g. 8GiB). Exit status 0 when it fits, 3 when it does not.\n");
}

int cmd_plan(int argc, char **argv) {
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  const char *model = "esm2_t6_8M";
  int have_overhead = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help")) { usage(); return 0; }
    if (!v) { fprintf(stderr, "plan: %s needs a value (try --help)\n", a); return 2; }
    int ok = 1;
    if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--micro-batch") || !strcmp(a, "--seq")) {
      long long x = 0; /* the ranges of data.micro_batch and data.max_len */
      if (!cli_int_arg("plan", a, v, !strcmp(a, "--seq") ? 3 : 0,
                       !strcmp(a, "--seq") ? 65536 : 1 << 20, &x))
        return 2;
      *(!strcmp(a, "--seq") ? &r.seq_len : &r.micro_batch) = (int)x;
    }
    else if (!strcmp(a, "--precision"))
      ok = !strcmp(v, "fp32") ? (r.precision = ESMT_PRECISION_FP32, 1)
         : !strcmp(v, "fp16") ? (r.precision = ESMT_PRECISION_FP16, 1)
         : !strcmp(v, "bf16") ? (r.precision = ESMT_PRECISION_BF16, 1) : 0;
    else if (!strcmp(a, "--device-mem")) ok = parse_bytes(v, &r.device_budget);
    else if (!strcmp(a, "--offload")) ok = parse_policy(v, &r.offload_optimizer);
    else if (!strcmp(a, "--recompute")) ok = parse_policy(v, &r.recompute);
    else if (!strcmp(a, "--runtime-overhead")) ok = have_overhead = parse_bytes(v, &r.runtime_overhead);
    else { fprintf(stderr, "plan: unknown argument '%s' (try --help)\n", a); return 2; }
    if (!ok) { fprintf(stderr, "plan: bad value '%s' for %s\n", v, a); return 2; }
    i++;
  }
  esmt_status st = esmt_model_config_preset(model, &r.model);
  if (st) { cli_error("plan", st); return 2; }
  /* A GPU precision implies a CUDA context: count its typical size. */
  if (!have_overhead && r.precision != ESMT_PRECISION_FP32) r.runtime_overhead = 512ull << 20;
  esmt_plan p = ESMT_PLAN_INIT;
  st = esmt_plan_memory(&r, &p);
  if (st && st != ESMT_ERR_OUT_OF_MEMORY) { cli_error("plan", st); return 2; }
  static const char *const prec[] = {"fp32", "fp16", "bf16"};
  char buf[32];
  printf("plan: %s (%.1fM parameters), micro-batch %d x %d, %s, budget %s\n", model,
         (double)p.parameters / 1e6, p.micro_batch, r.seq_len, prec[r.precision],
         r.device_budget ? cli_bytes(r.device_budget, buf, 32) : "unlimited");
  printf("  policy: optimizer offload %s, activation recompute %s\n",
         p.offload_optimizer ? "on" : "off", p.recompute ? "on" : "off");
  for (int i = 0; i < ESMT_MEM_CLASS_COUNT; i++)
    printf("  %-16s %12s\n", esmt_mem_class_name((esmt_mem_class)i),
           cli_bytes(p.device[i], buf, 32));
  printf("  %-16s %12s  (%llu bytes)\n", "device total", cli_bytes(p.device_total, buf, 32),
         (unsigned long long)p.device_total);
  printf("  %-16s %12s  (offload: fp32 master weights, moments, gradients; half: the weight "
         "staging copy)\n", "host pinned",
         cli_bytes(p.host_pinned, buf, 32));
  printf("%s: %s\n", p.fits ? "fits" : "DOES NOT FIT", p.advice);
  return p.fits ? 0 : 3;
}
