/* SPDX-License-Identifier: MIT */
/* nccl_dp at world size 1 on a real GPU: the same short run with the
 * single-GPU backend (ampere_bf16, or turing_fp16 before sm_80) and with
 * nccl_dp forced into a one-rank data-parallel group (real ncclGetUniqueId,
 * ncclCommInitRankConfig and ncclAllReduce calls on the gradient buckets).
 * Both compute with the same cuda_common kernels and a one-rank sum is the
 * identity, so the losses must agree (printed bitwise, checked to 1e-5).
 * A third run adds ZeRO-1 (dist.zero 1: the ABI 1.3 reduce_scatter and
 * allgather, ncclReduceScatter/ncclAllGather with one rank), a fourth
 * ZeRO-2 (the gradient slots, each part reduce-scattered on the comm
 * stream into the one shard), a fifth ZeRO-3 (each layer's weights
 * all-gathered into a slot on the comm stream before it runs, the next
 * prefetched): the same losses again.
 * --mutant slot-wait|shard-wait runs the ZeRO-2 case alone with one of its
 * compute-stream waits dropped (memory/grad_shard.h), --mutant
 * gather-ready|gather-loaded|gather-ends the ZeRO-3 case with the comm
 * stream's wait for the compute stream (dist/dp_zero.c), the compute
 * stream's wait for a slot's all-gather or for the end parts'
 * (memory/weight_gather.h) dropped, for the emulator's stream-order check
 * to report (tests/gpu/emu/mutants.sh).
 * Also: the group must be on the device path, and an allreduce or
 * reduce_scatter on a device without comm_init fails with a message.
 * Without a usable GPU or NCCL it prints "SKIP: <reason>" and exits 77. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "dp_group.h"
#include "grad_shard.h"
#include "mem_source.h"
#include "registry.h"
#include "trainer.h"
#include "weight_gather.h"

enum { STEPS = 6 };

static esmt_context *make_ctx(const char *backend) {
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = getenv("ESMT_TEST_BACKEND_DIR");
  o.backend = backend;
  esmt_context *c = NULL;
  return esmt_context_create(&o, &c) ? NULL : c;
}

/* STEPS updates; the loss of each into loss[]. dp_on: 1 = a one-rank
 * group, 2 = the same with ZeRO-1, 3 = with ZeRO-2, 4 = with ZeRO-3.
 * Returns 0 or prints why. */
static int train(const char *backend, int dp_on, double *loss) {
  esmt_context *ctx = make_ctx(backend);
  if (!ctx) {
    printf("FAIL: context for %s: %s\n", backend, esmt_last_error());
    return 1;
  }
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 4; c.hidden_size = 128; c.num_heads = 4; c.max_positions = 64;
  esmt_model *m = NULL;
  esmt_trainer *t = NULL;
  mem_source ms = {.rows = 4, .repeat = 1}; /* one batch over and over: the loss must fall */
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  esmt_schedule o_sched = ESMT_SCHEDULE_INIT;
  o.schedule = &o_sched;
  o_sched.peak_lr = 1e-3;
  o_sched.warmup_steps = 2;
  o_sched.total_steps = 20;
  o.log_every = 0;
  o.max_steps = STEPS;
  esmt_status st = esmt_model_create(ctx, &c, 7, &m);
  if (!st) st = esmt_trainer_create(m, &o, &src, &t);
  if (!st && dp_on) {
    esmt_dp *dp = NULL;
    st = esmt_dp_create_from_env(64 << 10, 1, ESMT_COMM_AUTO, &dp); /* small buckets: many calls */
    if (!st) esmt_dp_set_zero(dp, dp_on - 1);
    if (!st) st = esmt_trainer_set_dp(t, dp);
    if (!st && !esmt_dp_on_device(dp))
      st = esmt_fail(ESMT_ERR_INTERNAL, "nccl_dp did not take the device path");
    if (!st && esmt_dp_zero(dp) != dp_on - 1)
      st = esmt_fail(ESMT_ERR_INTERNAL, "ZeRO is %d, asked for %d", esmt_dp_zero(dp),
                     dp_on - 1);
    if (!st && dp_on >= 3 && !m->mem.gshard)
      st = esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-2 kept the whole gradient buffer");
    if (!st && (dp_on == 4) != (m->mem.wgather != NULL))
      st = esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-3's weight slots %s", dp_on == 4 ? "missing"
                                                                                : "present");
  }
  for (int i = 0; !st && i < STEPS; i++) {
    esmt_train_metrics mt = {.struct_size = sizeof mt};
    st = esmt_trainer_step(t, &mt);
    loss[i] = mt.loss;
  }
  if (!st && dp_on == 4 && m->mem.wgather->prefetch_hits == 0)
    st = esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-3: no layer was prefetched (%llu gathers)",
                   (unsigned long long)m->mem.wgather->gathers);
  if (!st && dp_on >= 3) { /* a backward through the model's API alone (no trainer, which
                            * waits for the comm stream): the slots order the norm's read */
    esmt_batch b = ESMT_BATCH_INIT;
    esmt_forward_result fr = ESMT_FORWARD_RESULT_INIT;
    double norm = 0;
    st = src.next(src.user, &b);
    if (!st) st = esmt_model_forward(m, &b, &fr, NULL);
    if (!st) st = esmt_model_backward(m);
    if (!st) st = esmt_model_grad_norm(m, &norm);
    if (!st && !(norm > 0)) st = esmt_fail(ESMT_ERR_INTERNAL, "ZeRO-2: gradient norm %g", norm);
  }
  if (st) printf("FAIL: %s: %s\n", backend, esmt_last_error());
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
  return st != ESMT_OK;
}

/* allreduce before comm_init: a clear error. */
static int check_no_comm(void) {
  esmt_context *ctx = make_ctx("nccl_dp");
  if (!ctx) return 1;
  const esmtb_ops *ops = ctx->backend->ops;
  esmtb_open_options oo = {sizeof oo, 0, 0, 0};
  esmtb_device *dev = NULL;
  void *buf = NULL;
  int bad = ops->open(&oo, &dev) != 0;
  if (!bad) bad = ops->alloc(dev, ESMTB_MEM_DEVICE, 64, &buf) != 0;
  if (!bad) {
    esmtb_allreduce_args a = {sizeof a, ESMTB_F32, 4, buf};
    bad = ops->allreduce(dev, &a, NULL) == 0 || !strstr(esmt_last_error(), "comm_init");
    printf("allreduce without comm_init: %s\n", esmt_last_error());
    const size_t offs[2] = {0, 4};
    esmtb_shard_args r = {sizeof r, ESMTB_F32, 4, buf, 1, offs};
    bad |= !ESMTB_OPS_HAS(ops, reduce_scatter) || ops->reduce_scatter(dev, &r, NULL) == 0 ||
           !strstr(esmt_last_error(), "comm_init");
    printf("reduce_scatter without comm_init: %s\n", esmt_last_error());
    ops->free(dev, ESMTB_MEM_DEVICE, buf);
  }
  if (dev) ops->close(dev);
  esmt_context_destroy(ctx);
  return bad;
}

int main(int argc, char **argv) {
  const char *mutant = argc > 2 && !strcmp(argv[1], "--mutant") ? argv[2] : NULL;
  if (mutant && strcmp(mutant, "slot-wait") && strcmp(mutant, "shard-wait") &&
      strcmp(mutant, "gather-ready") && strcmp(mutant, "gather-loaded") &&
      strcmp(mutant, "gather-ends")) {
    fprintf(stderr, "--mutant slot-wait|shard-wait|gather-ready|gather-loaded|gather-ends\n");
    return 2;
  }
  if (!getenv("ESMT_TEST_BACKEND_DIR")) {
    printf("SKIP: ESMT_TEST_BACKEND_DIR is not set (run through ctest)\n");
    return 77;
  }
  esmt_context *probe = make_ctx("nccl_dp");
  if (!probe) {
    printf("SKIP: nccl_dp cannot run here: %s\n", esmt_last_error());
    return 77;
  }
  const char *ref = (probe->backend->ops->caps & ESMTB_CAP_BF16) ? "ampere_bf16" : "turing_fp16";
  esmt_context_destroy(probe);
  double a[STEPS], b[STEPS], z[STEPS], z2[STEPS], z3[STEPS];
  if (mutant) { /* the emulator reports the missing wait; the run itself may pass */
    esmt_test_zero_drop_slot_wait = !strcmp(mutant, "slot-wait");
    esmt_test_zero_drop_shard_wait = !strcmp(mutant, "shard-wait");
    esmt_test_zero3_drop_ready_wait = !strcmp(mutant, "gather-ready");
    esmt_test_zero3_drop_loaded_wait = !strcmp(mutant, "gather-loaded");
    esmt_test_zero3_drop_ends_wait = !strcmp(mutant, "gather-ends");
    return train("nccl_dp", strncmp(mutant, "gather", 6) ? 3 : 4, z2);
  }
  if (train(ref, 0, a) || train("nccl_dp", 1, b) || train("nccl_dp", 2, z) ||
      train("nccl_dp", 3, z2) || train("nccl_dp", 4, z3))
    return 1;
  int bad = 0;
  for (int i = 0; i < STEPS; i++) {
    const double rel = fabs(a[i] - b[i]) / fmax(fabs(a[i]), 1e-30);
    const double relz = fabs(a[i] - z[i]) / fmax(fabs(a[i]), 1e-30);
    const double relz2 = fabs(a[i] - z2[i]) / fmax(fabs(a[i]), 1e-30);
    const double relz3 = fabs(a[i] - z3[i]) / fmax(fabs(a[i]), 1e-30);
    printf("RESULT step %d loss %s %.9g nccl_dp(world 1) %.9g rel %.3g%s, with ZeRO-1 %.9g "
           "rel %.3g%s, with ZeRO-2 %.9g rel %.3g%s, with ZeRO-3 %.9g rel %.3g%s\n", i + 1,
           ref, a[i], b[i], rel, a[i] == b[i] ? " (bitwise)" : "", z[i], relz,
           a[i] == z[i] ? " (bitwise)" : "", z2[i], relz2, a[i] == z2[i] ? " (bitwise)" : "",
           z3[i], relz3, a[i] == z3[i] ? " (bitwise)" : "");
    if (!(rel <= 1e-5) || !(relz <= 1e-5) || !(relz2 <= 1e-5) || !(relz3 <= 1e-5)) bad = 1;
  }
  if (a[STEPS - 1] >= a[0]) {
    printf("FAIL: the loss did not go down (%g -> %g)\n", a[0], a[STEPS - 1]);
    bad = 1;
  }
  bad |= check_no_comm();
  printf(bad ? "FAIL\n" : "PASS\n");
  return bad;
}
