/* SPDX-License-Identifier: MIT */
/* Memory planner: exact class sizes, agreement with the real activation
 * arena, policy choice and micro-batch search, and planned OOM. */
#include "test_util.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "param_shard.h"
#include "stream.h"

#define GIB (1024ull * 1024ull * 1024ull)

/* The shape req_for's request points to (one request at a time). */
static esmt_model_config g_model;

static esmt_plan_request req_for(const char *preset, int B, int T, esmt_precision p, uint64_t budget) {
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  g_model = (esmt_model_config)ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_model_config_preset(preset, &g_model), ESMT_OK);
  r.model = &g_model;
  r.micro_batch = B;
  r.seq_len = T;
  r.precision = p;
  r.device_budget = budget;
  return r;
}

/* What offload.c allocates for a model configuration (its own sizing
 * function, fed the model's shape). */
static uint64_t offload_host_bytes(const esmt_model_config *c, int esize) {
  uint64_t P = 0;
  assert_int_equal(esmt_model_config_param_count(c, &P), ESMT_OK);
  const esmt_offload_shape s = {P, esmt_norm_tensor_count(c), c->hidden_size, c->optimizer, esize};
  return esmt_offload_host_bytes(&s);
}

/* The largest ESM-2 on the cards the issue names: 3B on 8 GiB (weights or
 * gradients streamed), 15B on 80 GiB and on 24 GiB. The streamed classes
 * are esmt_stream_sizes' figures for the model's parts (what stream.c
 * allocates; test_stream checks the allocation against them). */
static void expect_streamed_fit(const char *preset, esmt_precision pr, uint64_t budget,
                                int want_level) {
  esmt_plan_request r = req_for(preset, 1, 512, pr, budget);
  r.runtime_overhead = 512ull << 20;
  r.stream = -1;
  esmt_plan p = ESMT_PLAN_INIT;
  if (esmt_plan_memory(&r, &p) != ESMT_OK) fail_msg("%s: %s", preset, esmt_last_error());
  assert_true(p.fits && p.offload_optimizer);
  assert_int_equal(p.stream, want_level);
  assert_true(p.device_total <= budget);
  esmt_layout ly;
  assert_int_equal(esmt_layout_build(r.model, &ly), ESMT_OK);
  const esmt_stream_bytes b = esmt_stream_sizes(p.stream, ly.part_bounds, ly.n_parts, 2,
                                                ly.n_norm, r.model->hidden_size);
  assert_int_equal(p.device[ESMT_MEM_GRADIENTS], b.device_grads);
  /* host: offload's buffers and the bounce buffers */
  assert_int_equal(p.host_pinned, offload_host_bytes(r.model, 2) + b.host_extra);
  /* over the link per micro-batch: the layers' gradients (fp32) down, and
   * for weights their half copies up twice */
  const uint64_t layers = ly.part_bounds[ly.n_parts - 1] - ly.part_bounds[1];
  assert_int_equal(p.stream_bytes, layers * 4 + (want_level == ESMT_STREAM_WEIGHTS ? 4 * layers : 0));
  print_message("%s in %.0f GiB: %.2f GiB on the device, stream %d, host %.1f GiB, link %.1f "
                "GiB per micro-batch\n", preset, (double)budget / GIB,
                (double)p.device_total / GIB, p.stream, (double)p.host_pinned / GIB,
                (double)p.stream_bytes / GIB);
  esmt_layout_free(&ly);
}

static void test_streamed_levels_fit(void **state) {
  (void)state;
  expect_streamed_fit("esm2_t36_3B", ESMT_PRECISION_FP16, 8 * GIB, ESMT_STREAM_GRADIENTS);
  expect_streamed_fit("esm2_t48_15B", ESMT_PRECISION_BF16, 80 * GIB, ESMT_STREAM_GRADIENTS);
  expect_streamed_fit("esm2_t48_15B", ESMT_PRECISION_BF16, 24 * GIB, ESMT_STREAM_WEIGHTS);
  /* without streaming neither 3B on 8 GiB nor 15B on 80 GiB fits */
  esmt_plan_request r = req_for("esm2_t48_15B", 1, 512, ESMT_PRECISION_BF16, 80 * GIB);
  r.stream = ESMT_STREAM_NONE;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_OUT_OF_MEMORY);
  assert_non_null(strstr(p.advice, "streaming off"));
}

/* A host that cannot hold the offloaded state: 15B on 80 GiB needs 256 GiB
 * of host memory; with 64 GiB nothing fits and the advice says why, with
 * 300 GiB it fits as before. */
static void test_host_budget(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t48_15B", 0, 512, ESMT_PRECISION_BF16, 80 * GIB);
  r.stream = -1;
  r.host_budget = 64 * GIB;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_OUT_OF_MEMORY);
  assert_false(p.fits);
  assert_true(p.host_pinned > r.host_budget);
  assert_non_null(strstr(p.advice, "of host memory for the offloaded"));
  assert_non_null(strstr(p.advice, "64.0 GiB is available"));
  r.host_budget = 300 * GIB;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_true(p.fits && p.host_pinned <= r.host_budget);
  /* a plan without offload needs no host memory: a tiny budget does not matter */
  esmt_plan_request s = req_for("esm2_t6_8M", 4, 128, ESMT_PRECISION_FP32, 8 * GIB);
  s.host_budget = 1;
  assert_int_equal(esmt_plan_memory(&s, &p), ESMT_OK);
  assert_false(p.offload_optimizer);
}

/* Streaming needs the optimizer on the host; an older caller's request
 * (struct_size before `stream`) plans without streaming, and an older
 * plan struct is filled up to its size only. */
static void test_stream_request_rules(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t36_3B", 1, 512, ESMT_PRECISION_FP16, 8 * GIB);
  r.offload_optimizer = 0;
  r.stream = ESMT_STREAM_WEIGHTS;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(esmt_last_error(), "needs the optimizer offloaded"));
  r.offload_optimizer = -1;
  r.stream = 3;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT);
  r.stream = ESMT_STREAM_WEIGHTS;
  r.struct_size = (uint32_t)offsetof(esmt_plan_request, stream); /* an older caller */
  struct { esmt_plan p; char guard[64]; } old;
  memset(&old, 0x5a, sizeof old);
  old.p.struct_size = (uint32_t)offsetof(esmt_plan, stream);
  assert_int_equal(esmt_plan_memory(&r, &old.p), ESMT_ERR_OUT_OF_MEMORY); /* no streaming: 3B does not fit */
  const unsigned char *tail = (const unsigned char *)&old.p + offsetof(esmt_plan, stream);
  for (size_t i = 0; i < sizeof old.p - offsetof(esmt_plan, stream); i++) assert_int_equal(tail[i], 0x5a);
  r.struct_size = (uint32_t)offsetof(esmt_plan_request, stream) - 1;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_ABI);
}

static void test_650m_on_8gb(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t33_650M", 6, 512, ESMT_PRECISION_FP16, 8 * GIB);
  r.runtime_overhead = 512ull << 20;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_true(p.fits);
  assert_true(p.offload_optimizer); /* 16 bytes/param alone exceed 8 GiB */
  assert_int_equal(p.micro_batch, 6);
  assert_true(p.device_total <= 8 * GIB);
  assert_int_equal(p.device[ESMT_MEM_MASTER_WEIGHTS], 0);
  assert_int_equal(p.device[ESMT_MEM_MOMENTS], 0);
  assert_int_equal(p.device[ESMT_MEM_COMPUTE_WEIGHTS], p.parameters * 2);
  /* fp32 master, m, v, gradients; the fp16 staging image of the weights
   * (then the fp32 LayerNorm w/b) that one H2D copy uploads: exactly what
   * offload.c allocates (test_offload checks the allocation) */
  assert_int_equal(p.host_pinned, offload_host_bytes(r.model, 2));
  assert_true(p.host_pinned > p.parameters * 18 && p.host_pinned < p.parameters * 18 + (1u << 20));
  uint64_t sum = 0;
  for (int i = 0; i < ESMT_MEM_CLASS_COUNT; i++) sum += p.device[i];
  assert_int_equal(sum, p.device_total);
  print_message("650M fp16 6x512 in 8 GiB: %.2f GiB, offload %d, recompute %d\n",
                (double)p.device_total / GIB, p.offload_optimizer, p.recompute);
  /* Forbidding offload makes it a planned out-of-memory with advice. */
  r.offload_optimizer = 0;
  r.recompute = 0;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_OUT_OF_MEMORY);
  assert_false(p.fits);
  assert_non_null(strstr(esmt_last_error(), "does not fit"));
  assert_non_null(strstr(p.advice, "offload"));
}

static void test_unlimited_budget_is_plain(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t6_8M", 4, 512, ESMT_PRECISION_FP32, 0);
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_false(p.offload_optimizer);
  assert_false(p.recompute);
  assert_int_equal(p.device[ESMT_MEM_COMPUTE_WEIGHTS], 0); /* fp32 computes on the master */
  assert_int_equal(p.device[ESMT_MEM_MASTER_WEIGHTS], p.parameters * 4);
  assert_int_equal(p.device[ESMT_MEM_GRADIENTS], p.parameters * 4);
  assert_int_equal(p.device[ESMT_MEM_MOMENTS], p.parameters * 8);
}

/* The planner's activation bytes are the real arena's. */
static void test_matches_real_arena(void **state) {
  (void)state;
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&o, &ctx), ESMT_OK);
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 3; c.hidden_size = 48; c.num_heads = 4; c.max_positions = 64;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(ctx, &c, 1, &m), ESMT_OK);
  assert_int_equal(esmt_model_reserve(m, 5, 40), ESMT_OK);
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  r.model = &c;
  r.micro_batch = 5;
  r.seq_len = 40;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_int_equal(p.device[ESMT_MEM_ACTIVATIONS], m->arena_bytes);
  uint64_t n = 0;
  esmt_model_param_count(m, &n);
  assert_int_equal(p.parameters, n);
  esmt_model_destroy(m);
  esmt_context_destroy(ctx);
}

static void test_recompute_and_auto_batch(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t30_150M", 8, 1024, ESMT_PRECISION_BF16, 0);
  esmt_plan a = ESMT_PLAN_INIT, b = ESMT_PLAN_INIT;
  r.recompute = 0;
  assert_int_equal(esmt_plan_memory(&r, &a), ESMT_OK);
  r.recompute = 1;
  assert_int_equal(esmt_plan_memory(&r, &b), ESMT_OK);
  assert_true(b.device[ESMT_MEM_ACTIVATIONS] * 5 < a.device[ESMT_MEM_ACTIVATIONS]);
  /* Auto micro-batch: the answer fits and one more row would not. */
  r = req_for("esm2_t30_150M", 0, 1024, ESMT_PRECISION_BF16, 6 * GIB);
  r.offload_optimizer = 0;
  r.recompute = 0;
  assert_int_equal(esmt_plan_memory(&r, &a), ESMT_OK);
  assert_true(a.micro_batch >= 1);
  assert_true(a.device_total <= 6 * GIB);
  r.micro_batch = a.micro_batch + 1;
  assert_int_equal(esmt_plan_memory(&r, &b), ESMT_ERR_OUT_OF_MEMORY);
  assert_true(b.device_total > 6 * GIB);
}

/* A forced policy that does not fit (and is not the first in the search
 * order) still reports its attempt. */
static void test_forced_offload_that_does_not_fit(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t33_650M", 6, 512, ESMT_PRECISION_FP16, 8 * GIB);
  r.runtime_overhead = 512ull << 20;
  r.offload_optimizer = 1;
  r.recompute = 0;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_OUT_OF_MEMORY);
  assert_true(p.offload_optimizer);
  assert_false(p.recompute);
  assert_int_equal(p.micro_batch, 6);
  assert_true(p.device_total > 8 * GIB);
  assert_int_equal(p.device[ESMT_MEM_GRADIENTS], p.parameters * 4); /* fp32 grads stay */
  assert_int_equal(p.host_pinned, offload_host_bytes(r.model, 2));
}

static void test_misuse(void **state) {
  (void)state;
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT); /* no model */
  assert_non_null(strstr(esmt_last_error(), "request.model"));
  r.model = &mc;
  r.seq_len = 5000;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT);
  r.seq_len = 512;
  mc.num_heads = 7;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_CONFIG);
  assert_int_equal(esmt_plan_memory(NULL, &p), ESMT_ERR_INVALID_ARGUMENT);
  assert_string_equal(esmt_mem_class_name(ESMT_MEM_ACTIVATIONS), "activations");
}

/* One request from a configuration for the trainer and the CLI alike
 * (#17): the CUDA context counts for half precision on a device backend
 * only, precision auto resolves on the backend, dist.zero turns auto
 * offload off; the shape is the trainer's. */
static void test_request_from_config(void **state) {
  (void)state;
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "backend.precision", "fp16"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "data.max_len", "512"), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "data.tokens_per_batch", "1500"), ESMT_OK);
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request r = ESMT_PLAN_REQUEST_INIT;
  /* no backend known: a half precision means a GPU and its context */
  assert_int_equal(esmt_config_plan_request(c, NULL, &mc, &r), ESMT_OK);
  assert_ptr_equal(r.model, &mc);
  assert_int_equal(r.precision, ESMT_PRECISION_FP16);
  assert_int_equal(r.runtime_overhead, 512ull << 20);
  assert_int_equal(r.micro_batch, 3); /* 1500 tokens of 512-token rows, rounded up */
  assert_int_equal(r.seq_len, 512);
  assert_int_equal(r.model->num_layers, 6);
  /* on the cpu backend (host memory): no CUDA context */
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  esmt_context *ctx = NULL;
  assert_int_equal(esmt_context_create(&o, &ctx), ESMT_OK);
  assert_int_equal(esmt_config_plan_request(c, ctx, &mc, &r), ESMT_OK);
  assert_int_equal(r.precision, ESMT_PRECISION_FP16);
  assert_int_equal(r.runtime_overhead, 0);
  /* auto resolves as the model would: fp32 on the cpu backend */
  assert_int_equal(esmt_config_set(c, "backend.precision", "auto"), ESMT_OK);
  assert_int_equal(esmt_config_plan_request(c, ctx, &mc, &r), ESMT_OK);
  assert_int_equal(r.precision, ESMT_PRECISION_FP32);
  assert_int_equal(r.offload_optimizer, -1);
  /* every stage may offload each rank's shard (auto stays auto) */
  assert_int_equal(esmt_config_set(c, "dist.zero", "1"), ESMT_OK);
  assert_int_equal(esmt_config_plan_request(c, ctx, &mc, &r), ESMT_OK);
  assert_int_equal(r.offload_optimizer, -1);
  assert_int_equal(r.stream, ESMT_STREAM_NONE);
  assert_int_equal(esmt_config_set(c, "dist.zero", "3"), ESMT_OK);
  assert_int_equal(esmt_config_plan_request(c, ctx, &mc, &r), ESMT_OK);
  assert_int_equal(r.offload_optimizer, -1);
  assert_int_equal(r.stream, ESMT_STREAM_NONE);
  esmt_context_destroy(ctx);
  esmt_config_destroy(c);
}

/* Lion keeps one moment: half of AdamW's optimizer state on the device, and
 * 4 bytes a parameter less on the host under offload. A caller whose model
 * config ends before the optimizer field gets AdamW's figures. */
static void test_lion_halves_the_moments(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t6_8M", 4, 512, ESMT_PRECISION_FP32, 0);
  g_model.optimizer = ESMT_OPTIMIZER_LION;
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_int_equal(p.device[ESMT_MEM_MOMENTS], p.parameters * 4);
  r.offload_optimizer = 1;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_int_equal(p.host_pinned, p.parameters * 12); /* master, gradients, m */
  g_model.optimizer = ESMT_OPTIMIZER_ADAMW;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_int_equal(p.host_pinned, p.parameters * 16);
  /* an older caller's struct: no optimizer field, AdamW */
  g_model.optimizer = ESMT_OPTIMIZER_LION;
  g_model.struct_size = (uint32_t)offsetof(esmt_model_config, optimizer);
  r.offload_optimizer = 0;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_int_equal(p.device[ESMT_MEM_MOMENTS], p.parameters * 8);
  /* an unknown kind is refused */
  g_model.struct_size = sizeof g_model;
  g_model.optimizer = (esmt_optimizer_kind)7;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT);
  /* optimizer.kind in a configuration reaches the request */
  esmt_config *c = NULL;
  assert_int_equal(esmt_config_create(&c), ESMT_OK);
  assert_int_equal(esmt_config_set(c, "optimizer.kind", "lion"), ESMT_OK);
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  assert_int_equal(esmt_config_plan_request(c, NULL, &mc, &r), ESMT_OK);
  assert_int_equal(mc.optimizer, ESMT_OPTIMIZER_LION);
  assert_int_not_equal(esmt_config_set(c, "optimizer.kind", "sgd"), ESMT_OK);
  esmt_config_destroy(c);
}

/* Timed plans: with measured rates the planner picks the fastest policy
 * that fits, not the first. 15B in 24 GiB: the first to fit streams its
 * weights at a few rows, too few for the compute to hide the link; with
 * recompute many more rows fit and the transfers hide behind them. */
static void test_timed_plan_prefers_hidden_transfers(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t48_15B", 0, 512, ESMT_PRECISION_BF16, 24 * GIB);
  r.tokens_per_update = 1u << 21;
  r.stream = -1;
  esmt_plan first = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &first), ESMT_OK);
  assert_int_equal(first.stream, ESMT_STREAM_WEIGHTS);
  assert_int_equal(first.recompute, 0);
  assert_true(first.compute_seconds == 0); /* untimed without rates */
  r.device_flops = 60e12;
  r.link_bandwidth = 12e9;
  r.host_bandwidth = 20e9;
  esmt_plan timed = ESMT_PLAN_INIT, forced = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &timed), ESMT_OK);
  assert_int_equal(timed.stream, ESMT_STREAM_WEIGHTS);
  assert_int_equal(timed.recompute, 1);
  assert_true(timed.micro_batch > 4 * first.micro_batch);
  assert_non_null(strstr(timed.advice, "the fastest of the policies that fit"));
  r.recompute = 0; /* the first-fit policy, timed */
  assert_int_equal(esmt_plan_memory(&r, &forced), ESMT_OK);
  assert_int_equal(forced.micro_batch, first.micro_batch);
  const double t_forced = (forced.compute_seconds + forced.exposed_seconds) /
                          ((double)forced.micro_batches * forced.micro_batch);
  const double t_timed = (timed.compute_seconds + timed.exposed_seconds) /
                         ((double)timed.micro_batches * timed.micro_batch);
  assert_true(t_timed < t_forced);
  assert_true(forced.exposed_seconds > 0.1 * forced.compute_seconds);
  assert_true(timed.exposed_seconds < 0.05 * timed.compute_seconds);
  /* the update's micro-batches cover its tokens */
  assert_true((uint64_t)timed.micro_batches * timed.micro_batch * 512 >= r.tokens_per_update);
  assert_true((uint64_t)(timed.micro_batches - 1) * timed.micro_batch * 512 < r.tokens_per_update);
}

/* The time model's monotony: a faster link never adds time, a slower one
 * exposes transfers; without offload the link is not needed; bad rates are
 * refused. */
static void test_timed_plan_rates(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t36_3B", 4, 512, ESMT_PRECISION_FP16, 0);
  r.offload_optimizer = 1;
  r.recompute = 1;
  r.stream = ESMT_STREAM_WEIGHTS;
  r.device_flops = 50e12;
  double prev = -1;
  for (double gbps = 1; gbps <= 64; gbps *= 4) {
    r.link_bandwidth = gbps * 1e9;
    esmt_plan p = ESMT_PLAN_INIT;
    assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
    assert_true(p.compute_seconds > 0);
    assert_true(p.link_seconds > 0);
    if (prev >= 0) assert_true(p.exposed_seconds <= prev);
    prev = p.exposed_seconds;
  }
  r.link_bandwidth = 0; /* offload without a link rate: untimed */
  esmt_plan p = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_true(p.compute_seconds == 0);
  r.offload_optimizer = 0; /* resident: the device rate times it alone */
  r.stream = ESMT_STREAM_NONE;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_OK);
  assert_true(p.compute_seconds > 0 && p.exposed_seconds == 0 && p.link_seconds == 0);
  r.device_flops = -1;
  assert_int_equal(esmt_plan_memory(&r, &p), ESMT_ERR_INVALID_ARGUMENT);
}

/* ZeRO-1/2 with the optimizer offloaded: a rank's host holds its shard
 * (about 1/N of one process's offloaded state), the ranks of one host
 * share its budget (ranks_per_host), ZeRO-3 and streaming do not combine
 * with ZeRO's offload, and the 3 x 10 GiB box with 12 GiB of host memory
 * is told why 3B cannot train there and what can. */
static void test_zero_offload_per_rank(void **state) {
  (void)state;
  esmt_plan_request r = req_for("esm2_t33_650M", 1, 512, ESMT_PRECISION_BF16, 0);
  r.offload_optimizer = 1;
  r.recompute = 0;
  r.stream = 0;
  esmt_plan one = ESMT_PLAN_INIT, two = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &one), ESMT_OK);
  r.world_size = 2;
  r.zero = 1;
  assert_int_equal(esmt_plan_memory(&r, &two), ESMT_OK);
  assert_true(two.offload_optimizer);
  /* the shard's master, gradients, moments and staging; the LayerNorm image whole */
  const esmt_offload_shape sh = {(esmt_zero_shard_max(one.parameters, 2)),
                                 esmt_norm_tensor_count(&g_model), g_model.hidden_size,
                                 g_model.optimizer, 2};
  assert_int_equal(two.host_pinned, esmt_offload_host_bytes(&sh));
  assert_true(two.host_pinned * 2 < one.host_pinned + (1u << 20)); /* 2 LayerNorm images */
  assert_int_equal(two.device_total, one.device_total); /* the device keeps what it did */
  printf("650M bf16 offloaded: host %.2f GiB for one process, %.2f GiB a rank of 2\n",
         (double)one.host_pinned / GIB, (double)two.host_pinned / GIB);
  /* one host's budget for both ranks, or for one with ranks_per_host 1 */
  r.host_budget = 2 * two.host_pinned;
  assert_int_equal(esmt_plan_memory(&r, &two), ESMT_OK);
  r.host_budget = 2 * two.host_pinned - 1;
  assert_int_equal(esmt_plan_memory(&r, &two), ESMT_ERR_OUT_OF_MEMORY);
  r.ranks_per_host = 1;
  assert_int_equal(esmt_plan_memory(&r, &two), ESMT_OK);
  /* ZeRO-3 offloaded: the same host shard; on the device the shard of the
   * compute weights and gradients, the end parts and the slots
   * (offload_zero3.c), no moments, no master */
  r.zero = 3;
  esmt_plan three = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &three), ESMT_OK);
  assert_true(three.offload_optimizer);
  assert_int_equal(three.host_pinned, two.host_pinned);
  assert_int_equal(three.device[ESMT_MEM_MASTER_WEIGHTS], 0);
  assert_int_equal(three.device[ESMT_MEM_MOMENTS], 0);
  assert_true(three.device[ESMT_MEM_COMPUTE_WEIGHTS] < two.device[ESMT_MEM_COMPUTE_WEIGHTS]);
  assert_true(three.device[ESMT_MEM_GRADIENTS] < two.device[ESMT_MEM_GRADIENTS]);
  printf("650M bf16 offloaded, 2 ranks: device %.2f GiB at ZeRO-1, %.2f GiB at ZeRO-3\n",
         (double)two.device_total / GIB, (double)three.device_total / GIB);
  /* what the ranks refuse */
  r.zero = 2;
  r.stream = ESMT_STREAM_GRADIENTS;
  assert_int_equal(esmt_plan_memory(&r, &two), ESMT_ERR_UNSUPPORTED);
  /* 3B on 3 x 10 GiB with 12 GiB of host memory: 16 bytes a parameter of
   * fp32 state (42.3 GiB) against 42 GiB; nothing of this engine fits 3B
   * there, and the advice names the largest ESM-2 that does */
  r = req_for("esm2_t36_3B", 0, 512, ESMT_PRECISION_BF16, 10 * GIB);
  r.world_size = 3;
  r.zero = -1;
  r.host_budget = 12 * GIB;
  esmt_plan box = ESMT_PLAN_INIT;
  assert_int_equal(esmt_plan_memory(&r, &box), ESMT_ERR_OUT_OF_MEMORY);
  printf("3 x 10 GiB + 12 GiB: %s\n", box.advice);
  assert_non_null(strstr(box.advice, "keep 16 bytes each"));
  assert_non_null(strstr(box.advice, "no precision or optimizer of this engine fits"));
  assert_non_null(strstr(box.advice, "esm2_t33_650M"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_650m_on_8gb),
      cmocka_unit_test(test_unlimited_budget_is_plain),
      cmocka_unit_test(test_matches_real_arena),
      cmocka_unit_test(test_recompute_and_auto_batch),
      cmocka_unit_test(test_forced_offload_that_does_not_fit),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_request_from_config),
      cmocka_unit_test(test_lion_halves_the_moments),
      cmocka_unit_test(test_streamed_levels_fit),
      cmocka_unit_test(test_stream_request_rules),
      cmocka_unit_test(test_host_budget),
      cmocka_unit_test(test_timed_plan_prefers_hidden_transfers),
      cmocka_unit_test(test_timed_plan_rates),
      cmocka_unit_test(test_zero_offload_per_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
