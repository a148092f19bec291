/* SPDX-License-Identifier: MIT */
/* The run directory is the library's (issue #37): the trainer keeps the
 * rules the CLI kept alone before.
 *  - a second trainer into a run is refused at its first step, save or run
 *    and leaves every file of the run as it was (a snapshot of names,
 *    sizes, times and contents compares equal); resuming the run's own
 *    checkpoint is allowed, another run's is refused;
 *  - a trainer against a live holder of run.lock (another process; the
 *    CLI's `train` when ESMT_TEST_CLI names it) is refused naming the
 *    holder's pid, and the holder's record is not touched;
 *  - a run.lock left by a process that ended (stale) is taken again;
 *  - a trainer that took a new run directory and wrote nothing leaves no
 *    directory behind;
 *  - the same rules through esmt_run_dir_check for programs without a
 *    trainer. */
#define _GNU_SOURCE
#include "test_util.h"
#include "cpu_dir_fixture.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static char g_data[600];

/* 40 short proteins. */
static int setup(void **state) {
  if (cpu_dir_setup(state)) return -1;
  return ingest_random_proteins("r", 40, 24, 13, 11, 0.0, g_data, sizeof g_data);
}

typedef struct rig {
  esmt_model *m;
  esmt_loader *l, *eval;
  esmt_trainer *t;
} rig;

/* A tiny model and loaders; esmt_trainer_create's status. */
static esmt_status rig_make(rig *r, const char *run_dir) {
  memset(r, 0, sizeof *r);
  esmt_model_config c = ESMT_MODEL_CONFIG_INIT;
  c.num_layers = 1;
  c.hidden_size = 16;
  c.num_heads = 2;
  c.max_positions = 64;
  c.precision = ESMT_PRECISION_FP32;
  assert_int_equal(esmt_model_create(g_ctx, &c, 3, &r->m), ESMT_OK);
  esmt_loader_options lo = ESMT_LOADER_OPTIONS_INIT;
  lo.dir = g_data;
  lo.max_len = 64;
  lo.batch_rows = 2;
  lo.tokens_per_batch = 128;
  assert_int_equal(esmt_loader_create(&lo, &r->l), ESMT_OK);
  lo.epochs = 1;
  lo.shuffle = 0;
  assert_int_equal(esmt_loader_create(&lo, &r->eval), ESMT_OK);
  esmt_batch_source src = ESMT_BATCH_SOURCE_INIT, ev = ESMT_BATCH_SOURCE_INIT;
  assert_int_equal(esmt_loader_as_source(r->l, &src), ESMT_OK);
  assert_int_equal(esmt_loader_as_source(r->eval, &ev), ESMT_OK);
  esmt_trainer_options o = ESMT_TRAINER_OPTIONS_INIT;
  o.run_dir = run_dir;
  o.max_steps = 6;
  o.log_every = 1;
  o.save_every = 2;
  o.keep_last = 0;
  esmt_status st = esmt_trainer_create(r->m, &o, &src, &r->t);
  if (!st) assert_int_equal(esmt_trainer_set_eval_source(r->t, &ev), ESMT_OK);
  return st;
}

static void rig_free(rig *r) {
  esmt_trainer_destroy(r->t);
  esmt_loader_destroy(r->l);
  esmt_loader_destroy(r->eval);
  esmt_model_destroy(r->m);
}

/* ---- a snapshot of a directory tree: every entry's name, type, size,
 * modification time and (files) content hash, one line each ---- */
static char g_snap[1 << 16];
static size_t g_snap_len;

static uint64_t content_hash(const char *path) {
  uint64_t h = 1469598103934665603ull;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  int c;
  while ((c = fgetc(f)) != EOF) h = (h ^ (uint64_t)c) * 1099511628211ull;
  fclose(f);
  return h;
}

static int snap_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)flag;
  (void)ftw;
  g_snap_len += (size_t)snprintf(g_snap + g_snap_len, sizeof g_snap - g_snap_len,
                                 "%s %o %lld %lld.%09ld %016llx\n", path, sb->st_mode,
                                 (long long)sb->st_size, (long long)sb->st_mtim.tv_sec,
                                 sb->st_mtim.tv_nsec,
                                 S_ISREG(sb->st_mode) ? (unsigned long long)content_hash(path) : 0ull);
  return g_snap_len >= sizeof g_snap - 1;
}

/* The snapshot of dir, malloc'd. */
static char *snapshot(const char *dir) {
  g_snap_len = 0;
  g_snap[0] = '\0';
  assert_int_equal(nftw(dir, snap_entry, 16, FTW_PHYS), 0);
  return strdup(g_snap);
}

/* A run of 6 steps with checkpoints at 2, 4 and 6 and its metrics. */
static void make_run(const char *run) {
  rig r;
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_OK);
  rig_free(&r);
}

static void test_second_trainer_changes_nothing(void **state) {
  (void)state;
  const char *run = path_in("run-a");
  make_run(run);
  char *before = snapshot(run);
  rig r;
  /* created: it may still resume the run; everything that writes is refused */
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  esmt_train_metrics mt = ESMT_TRAIN_METRICS_INIT;
  assert_int_equal(esmt_trainer_step(r.t, &mt), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "already holds a run"));
  assert_non_null(strstr(esmt_last_error(), "checkpoints/latest names step-00000006"));
  assert_int_equal(esmt_trainer_save(r.t, NULL, 0), ESMT_ERR_STATE);
  assert_int_equal(esmt_trainer_run(r.t), ESMT_ERR_STATE);
  assert_int_equal(esmt_trainer_take_run(r.t), ESMT_ERR_STATE);
  esmt_eval_metrics em = ESMT_EVAL_METRICS_INIT;
  assert_int_equal(esmt_trainer_evaluate(r.t, &em), ESMT_OK); /* reads only */
  /* weights from it (a new run needs a new directory) change nothing either */
  assert_int_equal(esmt_trainer_init_from(r.t, run), ESMT_OK);
  assert_int_equal(esmt_trainer_step(r.t, &mt), ESMT_ERR_STATE);
  rig_free(&r);
  char *after = snapshot(run);
  assert_string_equal(before, after);
  free(after);

  /* another run's checkpoint into it: refused, nothing changed */
  const char *other = path_in("run-b");
  make_run(other);
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_resume(r.t, other), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "continuing a checkpoint of another run there"));
  rig_free(&r);
  after = snapshot(run);
  assert_string_equal(before, after);
  free(after);
  free(before);

  /* its own checkpoint continues it */
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_resume(r.t, run), ESMT_OK);
  assert_int_equal(esmt_trainer_step(r.t, &mt), ESMT_OK);
  assert_int_equal(esmt_trainer_step_count(r.t), 7);
  rig_free(&r);
  /* and the same rules for a program without a trainer */
  assert_int_equal(esmt_run_dir_check(run, NULL), ESMT_ERR_STATE);
  assert_int_equal(esmt_run_dir_check(run, "latest"), ESMT_OK);
  assert_int_equal(esmt_run_dir_check(run, other), ESMT_ERR_STATE);
  assert_int_equal(esmt_run_dir_check(path_in("run-a/checkpoints"), "latest"), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "is the checkpoints directory of a run"));
  assert_int_equal(esmt_run_dir_check(g_data, NULL), ESMT_ERR_STATE);
  assert_non_null(strstr(esmt_last_error(), "is a dataset"));
  /* a directory no run may use is refused at create */
  assert_int_equal(rig_make(&r, g_data), ESMT_ERR_STATE);
  assert_null(r.t);
  rig_free(&r);
}

/* A child process that holds dir/run.lock until killed; its pid. */
static pid_t hold_lock(const char *dir) {
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    esmt_run_lock *lock = NULL;
    char c = esmt_run_lock_take(dir, &lock) == ESMT_OK ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  assert_int_equal(c, 'y');
  return pid;
}

/* The CLI's `train` into run, started in the background once its
 * run.lock holds its record; 0 when ESMT_TEST_CLI is not set. */
static pid_t cli_holder(const char *run) {
  const char *cli = getenv("ESMT_TEST_CLI");
  if (!cli || !*cli) return 0;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(cli, cli, "train", "--data", g_data, "--no-mfu", "--layers", "1", "--width", "16",
          "--heads", "2", "--warmup", "1", "--eval-every", "0", "--log-every", "0", "--threads",
          "1", "--steps", "1000000", "--out", run, (char *)NULL);
    _exit(127);
  }
  char lock[700];
  snprintf(lock, sizeof lock, "%s/run.lock", run);
  for (int i = 0; i < 600; i++) {
    struct stat sb;
    if (stat(lock, &sb) == 0 && sb.st_size > 0) return pid;
    struct timespec nap = {0, 50 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  kill(pid, SIGKILL);
  fail_msg("the CLI's train did not take %s", lock);
  return 0;
}

static void expect_refused_by(const char *run, pid_t holder) {
  char lock[700], *before;
  snprintf(lock, sizeof lock, "%s/run.lock", run);
  before = snapshot(lock);
  rig r;
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_take_run(r.t), ESMT_ERR_STATE);
  char want[128];
  snprintf(want, sizeof want, "is in use by another esmtrain process (pid %ld, host ",
           (long)holder);
  assert_non_null(strstr(esmt_last_error(), want));
  esmt_train_metrics mt = ESMT_TRAIN_METRICS_INIT;
  assert_int_equal(esmt_trainer_step(r.t, &mt), ESMT_ERR_STATE);
  rig_free(&r);
  char *after = snapshot(lock);
  assert_string_equal(before, after); /* the holder's record is untouched */
  free(before);
  free(after);
}

static void test_lock_held_elsewhere(void **state) {
  (void)state;
  const char *run = path_in("run-held");
  pid_t holder = hold_lock(run);
  expect_refused_by(run, holder);
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
  /* a holder that ended left a stale lock: taken again */
  rig r;
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_take_run(r.t), ESMT_OK);
  rig_free(&r);

  const char *cli_run = path_in("run-cli");
  holder = cli_holder(cli_run);
  if (!holder) {
    print_message("skipped: the CLI holder (ESMT_TEST_CLI is not set)\n");
    return;
  }
  expect_refused_by(cli_run, holder);
  kill(holder, SIGKILL);
  waitpid(holder, NULL, 0);
}

static void test_stale_lock_taken(void **state) {
  (void)state;
  const char *run = path_in("run-stale");
  assert_int_equal(mkdir(run, 0755), 0);
  /* a record of a process that is gone; no flock holds the file */
  write_text(path_in("run-stale/run.lock"), "pid 2147483646\nhost elsewhere\nstarted -\n");
  rig r;
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  esmt_train_metrics mt = ESMT_TRAIN_METRICS_INIT;
  assert_int_equal(esmt_trainer_step(r.t, &mt), ESMT_OK);
  char rec[256] = "";
  FILE *f = fopen(path_in("run-stale/run.lock"), "r");
  assert_non_null(f);
  size_t n = fread(rec, 1, sizeof rec - 1, f);
  fclose(f);
  rec[n] = '\0';
  long pid = 0;
  assert_int_equal(esmt_run_lock_record_pid(rec, &pid), 1);
  assert_int_equal(pid, (long)getpid());
  rig_free(&r);
}

static void test_new_run_left_absent(void **state) {
  (void)state;
  const char *run = path_in("fresh/nested/run");
  rig r;
  assert_int_equal(rig_make(&r, run), ESMT_OK);
  assert_int_equal(esmt_trainer_take_run(r.t), ESMT_OK);
  struct stat sb;
  assert_int_equal(stat(path_in("fresh/nested/run/run.lock"), &sb), 0);
  rig_free(&r); /* nothing written: the directories it made go */
  assert_int_not_equal(stat(path_in("fresh"), &sb), 0);
  /* a directory the user made stays, and so does one the run wrote into */
  assert_int_equal(mkdir(path_in("mine"), 0755), 0);
  assert_int_equal(rig_make(&r, path_in("mine")), ESMT_OK);
  assert_int_equal(esmt_trainer_take_run(r.t), ESMT_OK);
  rig_free(&r);
  assert_int_equal(stat(path_in("mine"), &sb), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_trainer_changes_nothing),
      cmocka_unit_test(test_lock_held_elsewhere),
      cmocka_unit_test(test_stale_lock_taken),
      cmocka_unit_test(test_new_run_left_absent),
  };
  return cmocka_run_group_tests(tests, setup, cpu_dir_teardown);
}
