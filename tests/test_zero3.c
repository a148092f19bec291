/* SPDX-License-Identifier: MIT */
/* ZeRO-3 (dist.zero 3) on the CPU backend over the real TCP communicator,
 * ranks as fork()ed processes (zero_rank_fixture.c):
 *  - each rank keeps the weights of its shard and all-gathers each part
 *    before it runs: one micro-batch per rank gives stage 2's weights bit
 *    for bit (fp32 and bf16, 2 and 3 ranks), one rank stage 0's, and 2
 *    ranks x 2 micro-batches stay within the data-parallel bound of one
 *    process taking all four; a 4-layer model gathers past the two slots;
 *  - the bytes each collective moved per update equal
 *    esmt_zero3_comm_volume's, and the planner's bf16 master is the shard;
 *  - checkpoints are the other stages' files, and a resume gathers again;
 *  - an evaluation with uneven shares of batches ends with stage 2's loss. */
#include "zero_rank_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

/* ZeRO-3: each rank keeps the weights of its shard and all-gathers each
 * part before it runs. The gradients are reduced as at stage 2 and the
 * gathered weights are the same bits, so one micro-batch per rank gives
 * stage 2's weights bit for bit (fp32 and bf16, 2 and 3 ranks); one rank
 * (the path a single GPU takes) gives stage 0's; 2 ranks x 2 micro-batches
 * stay within the data-parallel bound of one process taking all four. */
static void test_zero3(void **state) {
  (void)state;
  g_per_update = 1;
  for (int bf = 0; bf <= 1; bf++) {
    g_bf16 = bf;
    for (int world = 2; world <= 3; world++) {
      size_t n2, n3;
      float *z2 = train(world, 2, 0, &n2, "z3"), *z3 = train(world, 3, 0, &n3, "z3");
      assert_int_equal(n2, n3);
      assert_memory_equal(z2, z3, n2 * sizeof *z2);
      printf("%d ranks x 1 micro-batch, %s: dist.zero 3 == dist.zero 2 bit for bit\n", world,
             bf ? "bf16 (emulated)" : "fp32");
      check_volume("z3", world, 3, 1, n3);
      if (bf) check_plan_master("z3", world, 3, n3);
      free(z2);
      free(z3);
    }
  }
  g_bf16 = 0;
  size_t n0, n1, n;
  float *z0 = train(1, 0, 0, &n0, "z3one"), *z3 = train(1, 3, 0, &n1, "z3one");
  assert_int_equal(n0, n1);
  assert_memory_equal(z0, z3, n0 * sizeof *z0);
  printf("1 rank: dist.zero 3 (every layer gathered from the one shard) == dist.zero 0 bit for "
         "bit\n");
  free(z0);
  free(z3);
  g_per_update = 4;
  float *one = train(1, 0, 0, &n, "z3acc");
  g_per_update = 2;
  float *z2 = train(2, 2, 0, &n0, "z3acc");
  z3 = train(2, 3, 0, &n1, "z3acc");
  const double d_one = max_abs_diff(z3, one, n), d_z2 = max_abs_diff(z3, z2, n);
  printf("2 ranks x 2 micro-batches: dist.zero 3 vs one process x 4: max abs diff %.3g; vs "
         "dist.zero 2: %.3g\n", d_one, d_z2);
  assert_true(d_one < ACCUMULATION_MAX_ABS_DIFF);
  assert_int_equal(d_z2, 0); /* the same reductions, the same weights read */
  check_volume("z3acc", 2, 3, 2, n1);
  free(one);
  free(z2);
  free(z3);
  /* 4 layers, more than the two slots: each later pass gathers L - 2 */
  g_layers = 4;
  z2 = train(2, 2, 0, &n0, "z3deep");
  z3 = train(2, 3, 0, &n1, "z3deep");
  assert_memory_equal(z2, z3, n0 * sizeof *z2);
  printf("4 layers, 2 ranks x 2 micro-batches: dist.zero 3 == dist.zero 2 bit for bit\n");
  check_volume("z3deep", 2, 3, 2, n1);
  g_layers = 2;
  g_per_update = 1;
  free(z2);
  free(z3);
}

/* ZeRO-3's forwards gather the layers together: an evaluation where the
 * ranks hold 2 and 1 batches of a 4-layer model (rank 1 runs a stand-in
 * forward while rank 0 takes its second) ends, with stage 2's loss. */
static void test_zero3_uneven_eval(void **state) {
  (void)state;
  g_per_update = 1;
  char text[2][128];
  for (int i = 0; i < 2; i++) {
    const int z = i ? 3 : 2;
    char w[2][512], ev[512];
    run_spec s[2];
    memset(s, 0, sizeof s);
    for (int r = 0; r < 2; r++) {
      snprintf(w[r], sizeof w[r], "%s/ev-z%d-r%d", test_tmpdir, z, r);
      run_spec one = {r, 2, z, 2, NULL, 0, 0, 0, 0, w[r], NULL, NULL};
      s[r] = one;
    }
    int st[2];
    g_eval_batches = 2;
    g_layers = 4; /* more layers than the two slots: every forward gathers */
    run_ranks(s, 2, st);
    g_eval_batches = 0;
    g_layers = 2;
    assert_int_equal(st[0] | st[1], 0);
    snprintf(ev, sizeof ev, "%s.eval", w[0]);
    FILE *f = fopen(ev, "r");
    assert_non_null(f);
    text[i][fread(text[i], 1, sizeof text[i] - 1, f)] = '\0';
    fclose(f);
  }
  printf("evaluation over 2 + 1 batches: dist.zero 2 loss %s, dist.zero 3 %s\n", text[0],
         text[1]);
  assert_string_equal(text[0], text[1]);
}

/* ZeRO-3's checkpoints are the other stages' files; a resume gathers the
 * end parts from the file and the layers on demand again. */
static void test_zero3_checkpoint_resume(void **state) {
  (void)state;
  g_per_update = 1;
  char dirs[2][512], ck[2][1024];
  const int levels[2] = {1, 3};
  for (int i = 0; i < 2; i++) {
    snprintf(dirs[i], sizeof dirs[i], "%s/ck3-z%d", test_tmpdir, levels[i]);
    run_spec s[2] = {{0, 2, levels[i], 3, dirs[i], 3, 0, 0, 0, NULL, NULL, NULL},
                     {1, 2, levels[i], 3, dirs[i], 3, 0, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[i], ck[i], sizeof ck[i]), ESMT_OK);
  }
  same_checkpoint_files(ck[0], ck[1], "checkpoint, dist.zero 1 and 3:");
  for (int i = 0; i < 2; i++) {
    run_spec s[2] = {{0, 2, levels[i], 5, dirs[i], 5, 1, 0, 0, NULL, NULL, NULL},
                     {1, 2, levels[i], 5, dirs[i], 5, 1, 0, 0, NULL, NULL, NULL}};
    int st[2];
    run_ranks(s, 2, st);
    assert_int_equal(st[0] | st[1], 0);
    assert_int_equal(esmt_checkpoint_resolve(dirs[i], ck[i], sizeof ck[i]), ESMT_OK);
  }
  assert_non_null(strstr(ck[1], "step-00000005"));
  same_checkpoint_files(ck[0], ck[1], "checkpoint after resuming, dist.zero 1 and 3:");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zero3),
      cmocka_unit_test(test_zero3_checkpoint_resume),
      cmocka_unit_test(test_zero3_uneven_eval),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
