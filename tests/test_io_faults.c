/* SPDX-License-Identifier: MIT */
/* I/O fault injection: write(2), pwrite(2) and fsync(2) made by libesmtrain
 * are wrapped (-Wl,--wrap) so that the k-th call fails with EIO or ENOSPC,
 * or writes only half of what it was asked (then, in one mode, the next
 * call fails with ENOSPC) - for every k over writing a dataset (ingest)
 * and saving a checkpoint. Each time: a clear error naming the file and
 * the errno text, nothing partial left where a reader would take it, and
 * the previous dataset/checkpoint intact and loadable. A short write that
 * is followed by working writes must still give a correct file. (Disk
 * full through RLIMIT_FSIZE is in test_data and test_checkpoint.) */
#define _GNU_SOURCE
#include "test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "mem_source.h"
#include "trainer.h"

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
int __real_fsync(int fd);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off);
int __wrap_fsync(int fd);

typedef enum fault { F_NONE, F_EIO, F_ENOSPC, F_SHORT_THEN_OK, F_SHORT_THEN_ENOSPC } fault;
static const char *k_fault_name[] = {"none", "EIO", "ENOSPC", "short write", "short then ENOSPC"};

static fault g_mode;
static long g_calls, g_at;   /* count of wrapped calls; fail the g_at-th */
static int g_short_pending;  /* the call after a short write fails */
static long g_injected;
static int g_fault_on_dir;   /* the injected fault hit an fsync of a directory */

/* Decide for one call: 0 = run it, 1 = fail it, 2 = run half of it. */
static int decide(int dir_fsync) {
  g_calls++;
  if (g_short_pending) {
    g_short_pending = 0;
    g_injected++;
    g_fault_on_dir = dir_fsync;
    errno = ENOSPC;
    return 1;
  }
  if (g_mode == F_NONE || g_calls != g_at) return 0;
  g_injected++;
  g_fault_on_dir = dir_fsync;
  switch (g_mode) {
  case F_EIO: errno = EIO; return 1;
  case F_ENOSPC: errno = ENOSPC; return 1;
  case F_SHORT_THEN_ENOSPC: g_short_pending = 1; return 2;
  default: return 2;
  }
}

ssize_t __wrap_write(int fd, const void *buf, size_t n) {
  int d = decide(0);
  if (d == 1) return -1;
  if (d == 2 && n > 1) n /= 2;
  return __real_write(fd, buf, n);
}
ssize_t __wrap_pwrite(int fd, const void *buf, size_t n, off_t off) {
  int d = decide(0);
  if (d == 1) return -1;
  if (d == 2 && n > 1) n /= 2;
  return __real_pwrite(fd, buf, n, off);
}
int __wrap_fsync(int fd) {
  struct stat sb;
  int d = decide(fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode));
  if (d == 1) return -1;
  return __real_fsync(fd);
}

static void arm(fault mode, long at) {
  g_mode = mode;
  g_at = at;
  g_calls = 0;
  g_short_pending = 0;
  g_fault_on_dir = 0;
}

/* A fault the library may absorb: a short write it retries, or the fsync
 * of a directory after the rename that published finished, synced files
 * (then it warns: either state is complete after a crash). */
static int absorbable(fault mode) {
  return mode == F_SHORT_THEN_OK || g_fault_on_dir;
}

static char g_dir[256];
static esmt_context *g_ctx;

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "%s", test_mkdtemp());
  char fa[512];
  snprintf(fa, sizeof fa, "%s/p.fa", g_dir);
  FILE *f = fopen(fa, "w");
  if (!f) return -1;
  uint64_t s = 7;
  for (int r = 0; r < 300; r++) {
    fprintf(f, ">r%d\n", r);
    int n = 30 + r % 50;
    for (int i = 0; i < n; i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      fputc("ACDEFGHIKLMNPQRSTVWY"[(s >> 33) % 20], f);
    }
    fputc('\n', f);
  }
  fclose(f);
  esmt_context_options o = ESMT_CONTEXT_OPTIONS_INIT;
  o.backend_path = test_backend_dir();
  o.backend = "cpu";
  o.num_threads = 1;
  return esmt_context_create(&o, &g_ctx) == ESMT_OK ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  esmt_context_destroy(g_ctx);
  test_rmtree(g_dir);
  return 0;
}

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static esmt_status ingest(const char *out) {
  char fa[512];
  snprintf(fa, sizeof fa, "%s/p.fa", g_dir);
  const char *in[] = {fa};
  esmt_ingest_options io = ESMT_INGEST_OPTIONS_INIT;
  io.inputs = in;
  io.n_inputs = 1;
  io.output_dir = out;
  io.valid_fraction = 0.2;
  io.shard_tokens = 4096; /* several shards: more write calls to fail */
  return esmt_ingest(&io, NULL);
}

/* The error must say what failed in words a user can act on. */
static void assert_clear_error(fault mode) {
  const char *msg = esmt_last_error();
  const char *want = mode == F_EIO ? "Input/output error" : "No space left on device";
  if (!strstr(msg, want)) fail_msg("%s: message lacks '%s': %s", k_fault_name[mode], want, msg);
}

static void test_ingest_faults(void **state) {
  (void)state;
  char good[512], out[512];
  snprintf(good, sizeof good, "%s/good", g_dir);
  arm(F_NONE, 0);
  assert_int_equal(ingest(good), ESMT_OK);
  const long calls = g_calls;
  printf("ingest: %ld write/pwrite/fsync calls\n", calls);
  assert_true(calls > 10);
  long runs = 0, absorbed = 0;
  for (fault mode = F_EIO; mode <= F_SHORT_THEN_ENOSPC; mode++)
    for (long k = 1; k <= calls; k++) {
      snprintf(out, sizeof out, "%s/o-%d-%ld", g_dir, (int)mode, k);
      arm(mode, k);
      esmt_status st = ingest(out);
      runs++;
      if (st == ESMT_OK) {
        /* only an absorbable fault may pass, and the dataset must be whole */
        if (!absorbable(mode)) fail_msg("%s at call %ld went unnoticed", k_fault_name[mode], k);
        absorbed++;
        esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
        lo.dir = out;
        esmt_loader *l = NULL;
        arm(F_NONE, 0);
        assert_int_equal(esmt_loader_create(&lo, &l), ESMT_OK);
        esmt_loader_destroy(l);
        test_rmtree(out);
        continue;
      }
      if (mode == F_SHORT_THEN_OK) fail_msg("short write at call %ld: %s", k, esmt_last_error());
      assert_int_equal(st, ESMT_ERR_IO);
      assert_clear_error(mode);
      assert_false(exists(out)); /* nothing a loader would take */
    }
  /* the first dataset is untouched */
  arm(F_NONE, 0);
  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
  lo.dir = good;
  esmt_loader *l = NULL;
  assert_int_equal(esmt_loader_create(&lo, &l), ESMT_OK);
  esmt_loader_destroy(l);
  printf("ingest: %ld faulted runs, %ld faults injected, %ld absorbed (short writes, "
         "directory fsync after publishing)\n", runs, g_injected, absorbed);
}

static void test_checkpoint_faults(void **state) {
  (void)state;
  char run[512];
  snprintf(run, sizeof run, "%s/run", g_dir);
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 2; c.hidden_size = 32; c.num_heads = 2; c.max_positions = 64;
  esmt_model *m = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 3, &m), ESMT_OK);
  mem_source ms = {.rows = 2};
  esmt_batch_source src = mem_source_as_source(&ms);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.run_dir = run;
  o.keep_last = 0;
  o.log_every = 0;
  esmt_trainer *t = NULL;
  assert_int_equal(esmt_trainer_create(m, &o, &src, &t), ESMT_OK);
  esmt_train_metrics mt = {.struct_size = sizeof mt};
  arm(F_NONE, 0);
  assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
  char first[4096];
  assert_int_equal(esmt_trainer_save(t, first, sizeof first), ESMT_OK);
  assert_int_equal(esmt_trainer_step(t, &mt), ESMT_OK);
  /* count the calls of one save (into a scratch run directory) */
  char scratch[512];
  snprintf(scratch, sizeof scratch, "%s/scratch", g_dir);
  char *owned = t->run_dir;
  t->run_dir = scratch;
  arm(F_NONE, 0);
  assert_int_equal(esmt_trainer_save(t, NULL, 0), ESMT_OK);
  const long calls = g_calls;
  t->run_dir = owned;
  printf("checkpoint save: %ld write/fsync calls\n", calls);
  assert_true(calls >= 6);
  long runs = 0, absorbed = 0;
  for (fault mode = F_EIO; mode <= F_SHORT_THEN_ENOSPC; mode++)
    for (long k = 1; k <= calls; k++) {
      arm(mode, k);
      char dir[4096];
      esmt_status st = esmt_trainer_save(t, dir, sizeof dir);
      runs++;
      const int absorb = absorbable(mode);
      arm(F_NONE, 0);
      char latest[4096];
      assert_int_equal(esmt_checkpoint_resolve(run, latest, sizeof latest), ESMT_OK);
      if (st == ESMT_OK) {
        if (!absorb) fail_msg("%s at call %ld went unnoticed", k_fault_name[mode], k);
        absorbed++;
        assert_string_equal(latest, dir); /* the new one, complete */
        assert_int_equal(esmt_checkpoint_load(m, latest, 1, NULL), ESMT_OK);
        /* back to the first checkpoint being the latest, for the next round */
        test_rmtree(dir);
        char lp[600];
        snprintf(lp, sizeof lp, "%s/checkpoints/latest", run);
        FILE *f = fopen(lp, "w");
        assert_non_null(f);
        fputs(strrchr(first, '/') + 1, f);
        fclose(f);
        continue;
      }
      if (mode == F_SHORT_THEN_OK) fail_msg("short write at call %ld: %s", k, esmt_last_error());
      assert_int_equal(st, ESMT_ERR_IO);
      assert_clear_error(mode);
      assert_string_equal(latest, first); /* the previous checkpoint is still the one */
    }
  arm(F_NONE, 0);
  esmt_model *m2 = NULL;
  assert_int_equal(esmt_model_create(g_ctx, &c, 3, &m2), ESMT_OK);
  assert_int_equal(esmt_checkpoint_load(m2, first, 1, NULL), ESMT_OK);
  printf("checkpoint: %ld faulted saves (%ld absorbed), %ld faults injected in all\n", runs,
         absorbed, g_injected);
  esmt_model_destroy(m2);
  esmt_trainer_destroy(t);
  esmt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ingest_faults),
      cmocka_unit_test(test_checkpoint_faults),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
