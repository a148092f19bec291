/* SPDX-License-Identifier: MIT */
/* What test_zero1 (ZeRO-1 and ZeRO-2) and test_zero3 share: one rank's
 * training run (run_spec) in fork()ed processes over the real TCP
 * communicator, the checks every run gets (train: the ranks agree, each
 * holds its shard, the start-up log says so) and the comparisons of
 * volumes, plans and checkpoint files. Set the g_ knobs before the ranks
 * fork; their files go to test_tmpdir (test_util's group setup). */
#ifndef ESMT_TEST_ZERO_RANK_FIXTURE_H
#define ESMT_TEST_ZERO_RANK_FIXTURE_H

#include "test_util.h"

#include <stddef.h>
#include <stdint.h>

#include "esmtrain/esmtrain.h"

enum { STEPS = 5 }; /* updates of a train() run */

/* N ranks sum N micro-batches' gradients in another order than one process
 * accumulating them (test_data_parallel's bound) */
#define ACCUMULATION_MAX_ABS_DIFF 1e-6

extern int g_job;          /* counts rank groups: each its own rendezvous */
extern double g_clip;      /* train.grad_clip of the runs */
extern int g_bf16;         /* 1: bf16 compute on half_emu_backend (the cpu ops, bf16 emulated) */
extern int g_layers;       /* the test model's depth (2) */
extern int g_per_update;   /* micro-batches per rank per update (1) */
/* > 0: each rank evaluates after training on g_eval_batches - rank batches
 * (uneven shares) and writes the loss to weights_out + ".eval" */
extern int g_eval_batches;
/* With g_kill_nth > 0, rank g_kill_rank SIGKILLs itself on entering its
 * g_kill_nth collective of kind g_kill_op (set before the ranks fork). */
extern int g_kill_rank, g_kill_op;
extern uint64_t g_kill_nth;

typedef struct run_spec {
  int rank, world;
  int zero;             /* dist.zero */
  int64_t steps;
  const char *run_dir;  /* NULL: no checkpoints */
  int save_every;
  int resume;           /* resume from run_dir's latest first */
  int die_at;           /* > 0: this rank SIGKILLs itself after that update */
  int scaling;          /* dynamic loss scale on, NaN injected at update 3 */
  const char *weights_out, *error_out, *info_out;
} run_spec;

esmt_context *make_ctx(void);
esmt_model *make_model(esmt_context *ctx);
/* Runs each spec in its own process; statuses (or 128 + signal) out. */
void run_ranks(const run_spec *specs, int n, int *status);
/* world ranks with dist.zero `zero` for STEPS updates; every rank's
 * weights must agree bit for bit; returns rank 0's weights (malloc'ed). */
float *train(int world, int zero, int scaling, size_t *n, const char *tag);
double max_abs_diff(const float *a, const float *b, size_t n);
/* Two checkpoints' model and optimizer files are the same bytes. */
void same_checkpoint_files(const char *a, const char *b, const char *what);
/* The planner's figures for one rank of `world` at dist.zero `zero` of the
 * runs' model and micro-batch (in bf16 when bf16 is set). */
esmt_plan plan_of_runs(int world, int zero, int bf16);
/* The planner's master bytes for `world` ranks at `zero` in bf16 against
 * the largest shard the ranks of run `tag` held (4 bytes each). */
void check_plan_master(const char *tag, int world, int zero, size_t n);
/* Rank 0's bytes per collective over STEPS updates of run `tag` against
 * esmt_zero_comm_volume's (esmt_zero3_comm_volume's) per-update figures. */
void check_volume(const char *tag, int world, int zero, int k, size_t n);

#endif
