/* SPDX-License-Identifier: MIT */
/* Rank-layout detection (dist_env.c) from fake environments: torchrun,
 * Slurm (with host-list and tasks-per-node parsing), Open MPI, explicit
 * ESMTRAIN_* variables, and the messages for bad values. */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_env.h"
#include "esmtrain/esmtrain.h"

/* A NULL-terminated list of "NAME=value" strings. */
static const char *fake_get(const char *name, void *user) {
  const char *const *kv = user;
  size_t n = strlen(name);
  for (; *kv; kv++)
    if (strncmp(*kv, name, n) == 0 && (*kv)[n] == '=') return *kv + n + 1;
  return NULL;
}

static esmt_status detect(esmt_dist_env *d, const char *const *kv) {
  return esmt_dist_env_detect_with(d, fake_get, (void *)kv);
}

static void expect_error(const char *const *kv, const char *needle) {
  esmt_dist_env d;
  esmt_status st = detect(&d, kv);
  if (st == ESMT_OK) fail_msg("expected an error containing '%s'", needle);
  if (!strstr(esmt_last_error(), needle))
    fail_msg("error '%s' lacks '%s'", esmt_last_error(), needle);
}

static void test_single(void **state) {
  (void)state;
  const char *kv[] = {NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "single");
  assert_int_equal(d.rank, 0);
  assert_int_equal(d.world_size, 1);
  assert_int_equal(d.local_world_size, 1);
  assert_true(d.timeout_s == 300);
}

static void test_torchrun(void **state) {
  (void)state;
  const char *kv[] = {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                      "MASTER_ADDR=node7", "MASTER_PORT=29500", "ESMTRAIN_COMM_TIMEOUT=12.5",
                      "TORCHELASTIC_RUN_ID=abc", NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "torchrun");
  assert_int_equal(d.rank, 3);
  assert_int_equal(d.world_size, 8);
  assert_int_equal(d.local_rank, 1);
  assert_int_equal(d.local_world_size, 2);
  assert_string_equal(d.master_addr, "node7");
  assert_int_equal(d.master_port, 29500);
  assert_true(d.timeout_s == 12.5);
  assert_string_equal(d.rendezvous_file, "");
  char line[200];
  esmt_dist_env_describe(&d, line, sizeof line);
  assert_string_equal(line, "rank 3 of 8 (local 1 of 2) from torchrun, rank 0 at node7:29500");
  /* The token depends on the job id, not on the rank. */
  const char *kv2[] = {"RANK=0", "WORLD_SIZE=8", "MASTER_ADDR=node7", "MASTER_PORT=29500",
                       "TORCHELASTIC_RUN_ID=abc", NULL};
  const char *kv3[] = {"RANK=0", "WORLD_SIZE=8", "MASTER_ADDR=node7", "MASTER_PORT=29500",
                       "TORCHELASTIC_RUN_ID=xyz", NULL};
  esmt_dist_env d2, d3;
  assert_int_equal(detect(&d2, kv2), ESMT_OK);
  assert_int_equal(detect(&d3, kv3), ESMT_OK);
  assert_true(d.job_token == d2.job_token);
  assert_true(d.job_token != d3.job_token);
  /* Without local variables: one node assumed. */
  assert_int_equal(d2.local_rank, 0);
  assert_int_equal(d2.local_world_size, 8);
}

static void test_torchrun_errors(void **state) {
  (void)state;
  const char *a[] = {"RANK=3", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
  expect_error(a, "RANK=3 but WORLD_SIZE=2");
  const char *b[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=abc", NULL};
  expect_error(b, "MASTER_PORT 'abc' is not a port number");
  const char *b2[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=70000", NULL};
  expect_error(b2, "MASTER_PORT '70000' is not a port number");
  const char *c[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=29500", NULL};
  expect_error(c, "MASTER_ADDR is not set");
  const char *c2[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", NULL};
  expect_error(c2, "MASTER_PORT is not set");
  const char *e[] = {"RANK=1", NULL};
  expect_error(e, "RANK is set but WORLD_SIZE is not");
  const char *f[] = {"WORLD_SIZE=4", NULL};
  expect_error(f, "WORLD_SIZE is set but RANK is not");
  const char *g[] = {"RANK=x1", "WORLD_SIZE=4", NULL};
  expect_error(g, "RANK 'x1' is not an integer");
  const char *h[] = {"RANK=0", "WORLD_SIZE=0", NULL};
  expect_error(h, "WORLD_SIZE=0 is out of range");
  const char *i[] = {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2",
                     "MASTER_ADDR=h", "MASTER_PORT=5", NULL};
  expect_error(i, "LOCAL_RANK=2 but LOCAL_WORLD_SIZE=2");
  const char *j[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=h",
                     "MASTER_PORT=5", NULL};
  expect_error(j, "LOCAL_WORLD_SIZE=4 is larger than WORLD_SIZE=2");
  const char *k[] = {"ESMTRAIN_COMM_TIMEOUT=-1", NULL};
  expect_error(k, "ESMTRAIN_COMM_TIMEOUT '-1' is not a positive number");
  /* A single process needs no address. */
  const char *ok[] = {"RANK=0", "WORLD_SIZE=1", NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, ok), ESMT_OK);
}

static void test_esmtrain_precedence(void **state) {
  (void)state;
  const char *kv[] = {"ESMTRAIN_RANK=1",       "ESMTRAIN_WORLD_SIZE=2", "RANK=5",
                      "WORLD_SIZE=6",          "SLURM_PROCID=3",        "MASTER_ADDR=m",
                      "ESMTRAIN_MASTER_PORT=4000", "MASTER_PORT=5000",  NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "esmtrain");
  assert_int_equal(d.rank, 1);
  assert_int_equal(d.world_size, 2);
  assert_string_equal(d.master_addr, "m");
  assert_int_equal(d.master_port, 4000);
  const char *bad[] = {"ESMTRAIN_RANK=2", "ESMTRAIN_WORLD_SIZE=2", NULL};
  expect_error(bad, "ESMTRAIN_RANK=2 but ESMTRAIN_WORLD_SIZE=2");
}

static void test_slurm(void **state) {
  (void)state;
  const char *kv[] = {"SLURM_PROCID=5",       "SLURM_NTASKS=8",
                      "SLURM_LOCALID=1",      "SLURM_TASKS_PER_NODE=4(x2)",
                      "SLURM_NODEID=1",       "SLURM_JOB_NODELIST=gpu[01-04,07],login1",
                      "SLURM_JOB_ID=123456",  NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "slurm");
  assert_int_equal(d.rank, 5);
  assert_int_equal(d.world_size, 8);
  assert_int_equal(d.local_rank, 1);
  assert_int_equal(d.local_world_size, 4);
  assert_string_equal(d.master_addr, "gpu01");
  assert_int_equal(d.master_port, 20000 + 123456 % 20000);
  /* MASTER_ADDR/PORT win; the step's node list wins over the job's. */
  const char *kv2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NTASKS_PER_NODE=2",
                       "SLURM_STEP_NODELIST=a[7-8]", "SLURM_JOB_NODELIST=b1",
                       "MASTER_PORT=3333", NULL};
  assert_int_equal(detect(&d, kv2), ESMT_OK);
  assert_string_equal(d.master_addr, "a7");
  assert_int_equal(d.master_port, 3333);
  const char *kv3[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "MASTER_ADDR=x", "SLURM_JOB_ID=7",
                       "SLURM_JOB_NODELIST=b1", NULL};
  assert_int_equal(detect(&d, kv3), ESMT_OK);
  assert_string_equal(d.master_addr, "x");
  assert_int_equal(d.master_port, 20007);
  const char *bad1[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=gpu[01-",
                        "SLURM_JOB_ID=1", NULL};
  expect_error(bad1, "SLURM_JOB_NODELIST: host list 'gpu[01-'");
  const char *bad2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=n1", NULL};
  expect_error(bad2, "SLURM_JOB_ID is missing");
  const char *bad3[] = {"SLURM_PROCID=2", "SLURM_NTASKS=2", NULL};
  expect_error(bad3, "SLURM_PROCID=2 but SLURM_NTASKS=2");
  const char *bad4[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_TASKS_PER_NODE=2(3)",
                        "SLURM_JOB_NODELIST=n1", "SLURM_JOB_ID=1", NULL};
  expect_error(bad4, "SLURM_TASKS_PER_NODE '2(3)'");
}

static void test_hostlist(void **state) {
  (void)state;
  char h[64];
  size_t n = 0;
  assert_int_equal(esmt_hostlist_nth("gpu[01-04,07],login1", 4, h, sizeof h, &n), ESMT_OK);
  assert_int_equal(n, 6);
  assert_string_equal(h, "gpu07");
  assert_int_equal(esmt_hostlist_nth("gpu[01-04,07],login1", 5, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "login1");
  assert_int_equal(esmt_hostlist_nth("gpu[01-04,07],login1", 2, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "gpu03");
  assert_int_equal(esmt_hostlist_nth("node1", 0, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "node1");
  assert_int_equal(n, 1);
  assert_int_equal(esmt_hostlist_nth("n[008-011]", 2, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "n010");
  assert_int_equal(n, 4);
  assert_int_equal(esmt_hostlist_nth("r[1-2]-n[3-4].x", 1, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "r1-n4.x");
  assert_int_equal(n, 4);
  assert_int_equal(esmt_hostlist_nth("a[9-10],b", 1, h, sizeof h, &n), ESMT_OK);
  assert_string_equal(h, "a10");
  /* Out-of-range index: count only. */
  assert_int_equal(esmt_hostlist_nth("a,b", 7, h, sizeof h, &n), ESMT_OK);
  assert_int_equal(n, 2);
  assert_string_equal(h, "");
  const char *bad[] = {"", "gpu[01-", "gpu]1", "gpu[]", "gpu[3-1]", "a,,b", "gpu[0a]",
                       "gpu[1-]", "a[1,]", ",a", "a[[1]]", "n[0-9999999]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (esmt_hostlist_nth(bad[i], 0, h, sizeof h, &n) == ESMT_OK)
      fail_msg("'%s' accepted", bad[i]);
    assert_non_null(strstr(esmt_last_error(), "host list"));
  }
}

static void test_tasks_per_node(void **state) {
  (void)state;
  int t = 0;
  assert_int_equal(esmt_slurm_tasks_on_node("2(x3),1", 0, &t), ESMT_OK);
  assert_int_equal(t, 2);
  assert_int_equal(esmt_slurm_tasks_on_node("2(x3),1", 2, &t), ESMT_OK);
  assert_int_equal(t, 2);
  assert_int_equal(esmt_slurm_tasks_on_node("2(x3),1", 3, &t), ESMT_OK);
  assert_int_equal(t, 1);
  assert_int_equal(esmt_slurm_tasks_on_node("4", 0, &t), ESMT_OK);
  assert_int_equal(t, 4);
  assert_int_not_equal(esmt_slurm_tasks_on_node("2(x3),1", 4, &t), ESMT_OK);
  assert_int_not_equal(esmt_slurm_tasks_on_node("2(3)", 0, &t), ESMT_OK);
  assert_int_not_equal(esmt_slurm_tasks_on_node("x", 0, &t), ESMT_OK);
  assert_int_not_equal(esmt_slurm_tasks_on_node("2,", 1, &t), ESMT_OK);
}

static void test_openmpi(void **state) {
  (void)state;
  const char *kv[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                      "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                      "MASTER_ADDR=10.0.0.1", "MASTER_PORT=6000", NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "openmpi");
  assert_int_equal(d.rank, 2);
  assert_int_equal(d.world_size, 4);
  assert_int_equal(d.local_rank, 0);
  assert_int_equal(d.local_world_size, 2);
  assert_string_equal(d.master_addr, "10.0.0.1");
  /* A rendezvous file replaces the address. */
  const char *kv2[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                       "ESMTRAIN_RENDEZVOUS_FILE=/shared/rv", NULL};
  assert_int_equal(detect(&d, kv2), ESMT_OK);
  assert_string_equal(d.rendezvous_file, "/shared/rv");
  assert_string_equal(d.master_addr, "");
  assert_int_equal(d.master_port, 0);
  /* Under mpirun MPI finds the ranks itself: no address needed ... */
  const char *mpi[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", NULL};
  assert_int_equal(detect(&d, mpi), ESMT_OK);
  assert_true(d.mpi_launched);
  assert_int_equal(d.comm, 0); /* auto */
  assert_string_equal(d.master_addr, "");
  /* ... unless the TCP ring is asked for */
  const char *bad[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "ESMTRAIN_COMM=tcp",
                       NULL};
  expect_error(bad, "MASTER_ADDR is not set: OMPI_COMM_WORLD_SIZE=4");
  const char *badkind[] = {"ESMTRAIN_COMM=infiniband", NULL};
  expect_error(badkind, "ESMTRAIN_COMM 'infiniband' is not auto, tcp or mpi");
  const char *want_mpi[] = {"ESMTRAIN_COMM=mpi", NULL};
  assert_int_equal(detect(&d, want_mpi), ESMT_OK);
  assert_int_equal(d.comm, 2);
  assert_false(d.mpi_launched);
  const char *bad2[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                        "OMPI_COMM_WORLD_LOCAL_RANK=3", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                        "MASTER_ADDR=a", "MASTER_PORT=1", NULL};
  expect_error(bad2, "OMPI_COMM_WORLD_LOCAL_RANK=3 but OMPI_COMM_WORLD_LOCAL_SIZE=2");
}

/* MPICH's Hydra, Intel MPI: PMI_RANK / PMI_SIZE, MPI_LOCALRANKID / MPI_LOCALNRANKS. */
static void test_pmi(void **state) {
  (void)state;
  const char *kv[] = {"PMI_RANK=3", "PMI_SIZE=4", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=2", NULL};
  esmt_dist_env d;
  assert_int_equal(detect(&d, kv), ESMT_OK);
  assert_string_equal(d.source, "pmi");
  assert_int_equal(d.rank, 3);
  assert_int_equal(d.world_size, 4);
  assert_int_equal(d.local_rank, 1);
  assert_int_equal(d.local_world_size, 2);
  assert_true(d.mpi_launched);
  /* torchrun's variables still win over a PMI the site exports */
  const char *tr[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=1", "PMI_RANK=5",
                      "PMI_SIZE=8", NULL};
  assert_int_equal(detect(&d, tr), ESMT_OK);
  assert_string_equal(d.source, "torchrun");
  assert_int_equal(d.world_size, 2);
  assert_false(d.mpi_launched);
  /* srun --mpi=pmix: Slurm's layout, MPI carries (no address needed) */
  const char *srun[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_JOB_ID=77", "PMIX_RANK=1",
                        NULL};
  assert_int_equal(detect(&d, srun), ESMT_OK);
  assert_string_equal(d.source, "slurm");
  assert_true(d.mpi_launched);
}

/* The public reading of the same layout, from the process environment:
 * none without a launcher, torchrun's when its variables are set, and a
 * malformed one refused naming the variable. */
static void test_launch_layout(void **state) {
  (void)state;
  int rank = -1, world = -1, local = -1, local_world = -1;
  assert_int_equal(esmt_launch_layout(&rank, &world, &local, &local_world), ESMT_OK);
  assert_int_equal(rank, 0);
  assert_int_equal(world, 1);
  assert_int_equal(local_world, 1);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "29500", 1);
  assert_int_equal(esmt_launch_layout(&rank, &world, &local, &local_world), ESMT_OK);
  assert_int_equal(rank, 3);
  assert_int_equal(world, 8);
  assert_int_equal(local, 1);
  assert_int_equal(local_world, 2);
  assert_int_equal(esmt_launch_layout(NULL, NULL, NULL, &local_world), ESMT_OK);
  setenv("RANK", "three", 1);
  assert_int_equal(esmt_launch_layout(&rank, NULL, NULL, NULL), ESMT_ERR_CONFIG);
  assert_non_null(strstr(esmt_last_error(), "RANK"));
  const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single),        cmocka_unit_test(test_torchrun),
      cmocka_unit_test(test_torchrun_errors), cmocka_unit_test(test_esmtrain_precedence),
      cmocka_unit_test(test_slurm),         cmocka_unit_test(test_hostlist),
      cmocka_unit_test(test_tasks_per_node), cmocka_unit_test(test_openmpi),
      cmocka_unit_test(test_pmi),           cmocka_unit_test(test_launch_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
