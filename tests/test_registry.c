/* SPDX-License-Identifier: MIT */
/* Backend registry: search order, ABI refusal, garbage files, forcing,
 * empty/missing directories, and the no-GPU choice. */
#define _GNU_SOURCE
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "esmtrain/esmtrain.h"

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb");
  if (!in) fail_msg("cannot open %s", from);
  FILE *out = fopen(to, "wb");
  if (!out) fail_msg("cannot create %s", to);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void stage_cpu(const char *dir) {
  char from[1024], to[1024];
  snprintf(from, sizeof from, "%s/cpu.so", test_backend_dir());
  snprintf(to, sizeof to, "%s/cpu.so", dir);
  copy_file(from, to);
}

static void stage_plugin(const char *dir, const char *name) {
  char from[1024], to[1024];
  snprintf(from, sizeof from, "%s/%s", ESMT_TEST_PLUGIN_DIR, name);
  snprintf(to, sizeof to, "%s/%s", dir, name);
  copy_file(from, to);
}

static esmt_status create_with(const char *path, const char *forced, esmt_context **ctx) {
  esmt_context_options opts = ESMT_CONTEXT_OPTIONS_INIT;
  opts.backend_path = path;
  opts.backend = forced;
  *ctx = NULL;
  return esmt_context_create(&opts, ctx);
}

/* Index of the backend entry whose path ends with `file`, or -1. */
static int find_entry(esmt_context *ctx, const char *file, esmt_backend_info *info) {
  int n = 0;
  assert_int_equal(esmt_context_backend_count(ctx, &n), ESMT_OK);
  for (int i = 0; i < n; i++) {
    info->struct_size = sizeof *info;
    assert_int_equal(esmt_context_backend_info(ctx, i, info), ESMT_OK);
    size_t lp = strlen(info->path), lf = strlen(file);
    if (lp >= lf && strcmp(info->path + lp - lf, file) == 0) return i;
  }
  return -1;
}

static void test_wrong_abi_refused(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  stage_cpu(dir);
  stage_plugin(dir, "bad_abi.so");
  stage_plugin(dir, "small_table.so");
  stage_plugin(dir, "abi1.so");
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_OK);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "bad_abi.so", &info) >= 0);
  assert_false(info.loaded);
  assert_false(info.available);
  assert_false(info.chosen);
  assert_non_null(strstr(info.reason, "ABI"));
  assert_non_null(strstr(info.path, "bad_abi.so"));
  assert_true(find_entry(ctx, "small_table.so", &info) >= 0);
  assert_false(info.loaded);
  assert_non_null(strstr(info.reason, "smaller"));
  /* A plugin of ABI 1 is refused with both versions named. */
  assert_true(find_entry(ctx, "abi1.so", &info) >= 0);
  assert_false(info.loaded);
  assert_non_null(strstr(info.reason, "ABI 1.6"));
  char speaks[32];
  snprintf(speaks, sizeof speaks, "speaks %d.%d", ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR);
  assert_non_null(strstr(info.reason, speaks));
  /* Despite their score of 1000 the refused plugins never win. */
  assert_string_equal(esmt_context_backend_name(ctx), "cpu");
  esmt_context_destroy(ctx);
  test_rmtree(dir);
}

/* 1 when /proc/self/maps maps a file whose path contains `text`. */
static int mapped(const char *text) {
  FILE *f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  fclose(f);
  return found;
}

/* A forced backend (the API or ESMTRAIN_BACKEND) loads its plugin alone:
 * the others and the libraries they need (cuBLASLt, NCCL) are never mapped
 * (issue #37). A plugin loaded once stays mapped (RTLD_NODELETE), so each
 * case uses its own copy. */
static void test_forced_maps_only_its_plugin(void **state) {
  (void)state;
  for (int how = 0; how < 3; how++) { /* the API, ESMTRAIN_BACKEND, not forced */
    const char *dir = test_mkdtemp();
    stage_cpu(dir);
    char from[1024], other[1024];
    snprintf(from, sizeof from, "%s/bad_abi.so", ESMT_TEST_PLUGIN_DIR);
    snprintf(other, sizeof other, "%s/other_backend.so", dir);
    copy_file(from, other);
    if (how == 1) setenv("ESMTRAIN_BACKEND", "cpu", 1);
    esmt_context *ctx;
    assert_int_equal(create_with(dir, how == 0 ? "cpu" : NULL, &ctx), ESMT_OK);
    unsetenv("ESMTRAIN_BACKEND");
    assert_string_equal(esmt_context_backend_name(ctx), "cpu");
    assert_int_equal(mapped(other), how == 2);
    esmt_context_destroy(ctx);
    test_rmtree(dir);
  }
}

static void test_garbage_file_skipped(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  stage_cpu(dir);
  char path[1024];
  snprintf(path, sizeof path, "%s/garbage.so", dir);
  const char junk[] = "this is not an ELF shared object\x00\x01\x02";
  write_file(path, junk, sizeof junk);
  /* A real shared object without the entry symbols. */
  char from[1024];
  snprintf(from, sizeof from, "%s/lib/libesmtrain.so", getenv("ESMT_TEST_BUILD_DIR"));
  snprintf(path, sizeof path, "%s/notabackend.so", dir);
  copy_file(from, path);
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_OK);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "garbage.so", &info) >= 0);
  assert_false(info.loaded);
  assert_non_null(strstr(info.reason, "cannot load"));
  assert_true(find_entry(ctx, "notabackend.so", &info) >= 0);
  assert_false(info.loaded);
  assert_non_null(strstr(info.reason, "not an esmtrain backend"));
  assert_string_equal(esmt_context_backend_name(ctx), "cpu");
  esmt_context_destroy(ctx);
  test_rmtree(dir);
}

/* A plugin whose shared-library dependency is not on the loader path is
 * skipped with a reason naming the library and what to do about it. */
static void test_missing_dependency_named(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  stage_cpu(dir);
  char from[1024], path[1024];
  snprintf(from, sizeof from, "%s/needs_missing_lib.so", ESMT_TEST_MISSING_DEP_DIR);
  snprintf(path, sizeof path, "%s/needs_missing_lib.so", dir);
  copy_file(from, path);
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_OK);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "needs_missing_lib.so", &info) >= 0);
  assert_false(info.loaded);
  assert_non_null(strstr(info.reason, "needs libesmt_missing_dep.so.1"));
  assert_non_null(strstr(info.reason, "LD_LIBRARY_PATH"));
  assert_string_equal(esmt_context_backend_name(ctx), "cpu");
  esmt_context_destroy(ctx);
  test_rmtree(dir);
}

static void test_only_garbage_is_error(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char path[1024];
  snprintf(path, sizeof path, "%s/cpu.so", dir);
  write_file(path, "junk", 4);
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_null(ctx);
  assert_non_null(strstr(esmt_last_error(), "cpu.so"));
  assert_non_null(strstr(esmt_last_error(), "cannot load"));
  test_rmtree(dir);
}

static void test_empty_and_missing_dirs(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_null(ctx);
  assert_non_null(strstr(esmt_last_error(), dir));
  assert_non_null(strstr(esmt_last_error(), "no backends"));
  char missing[512];
  snprintf(missing, sizeof missing, "%s/does-not-exist", dir);
  assert_int_equal(create_with(missing, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "does-not-exist (missing)"));
  test_rmtree(dir);
}

static void test_env_path_and_precedence(void **state) {
  (void)state;
  const char *tmp = test_mkdtemp();
  char empty[512], good[512];
  snprintf(empty, sizeof empty, "%s/empty", tmp);
  snprintf(good, sizeof good, "%s/good", tmp);
  assert_int_equal(mkdir(empty, 0755), 0);
  assert_int_equal(mkdir(good, 0755), 0);
  stage_cpu(good);
  esmt_context *ctx;
  setenv("ESMTRAIN_BACKEND_PATH", good, 1);
  assert_int_equal(create_with(NULL, NULL, &ctx), ESMT_OK);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "good/cpu.so", &info) >= 0);
  assert_true(info.chosen);
  esmt_context_destroy(ctx);
  /* A path given through the API wins over the environment. */
  assert_int_equal(create_with(empty, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "the API"));
  /* An env path with an empty dir first and a good one after works. */
  char both[1100];
  snprintf(both, sizeof both, "%s:%s", empty, good);
  setenv("ESMTRAIN_BACKEND_PATH", both, 1);
  assert_int_equal(create_with(NULL, NULL, &ctx), ESMT_OK);
  esmt_context_destroy(ctx);
  setenv("ESMTRAIN_BACKEND_PATH", empty, 1);
  assert_int_equal(create_with(NULL, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "ESMTRAIN_BACKEND_PATH"));
  unsetenv("ESMTRAIN_BACKEND_PATH");
  test_rmtree(tmp);
}

/* Two directories holding a backend of the same name: the earlier one is
 * used, the later one stays listed as shadowed, naming the one in use. */
static void test_shadowed_backend_listed(void **state) {
  (void)state;
  const char *tmp = test_mkdtemp();
  char first[512], second[512], both[1100];
  snprintf(first, sizeof first, "%s/first", tmp);
  snprintf(second, sizeof second, "%s/second", tmp);
  assert_int_equal(mkdir(first, 0755), 0);
  assert_int_equal(mkdir(second, 0755), 0);
  stage_cpu(first);
  stage_cpu(second);
  snprintf(both, sizeof both, "%s:%s", first, second);
  esmt_context *ctx;
  assert_int_equal(create_with(both, NULL, &ctx), ESMT_OK);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "first/cpu.so", &info) >= 0);
  assert_true(info.chosen && info.loaded);
  assert_true(find_entry(ctx, "second/cpu.so", &info) >= 0);
  assert_false(info.loaded || info.chosen);
  assert_non_null(strstr(info.reason, "shadowed by"));
  assert_non_null(strstr(info.reason, "first/cpu.so"));
  esmt_context_destroy(ctx);
  test_rmtree(tmp);
}

/* A cpu.so whose recorded library version is another one (the bytes of
 * "X.Y.Z" rewritten in a copy): refused, naming both versions. */
static void test_other_installation_refused(void **state) {
  (void)state;
  const char *dir = test_mkdtemp();
  char from[512], to[600];
  snprintf(from, sizeof from, "%s/cpu.so", test_backend_dir());
  snprintf(to, sizeof to, "%s/cpu.so", dir);
  FILE *f = fopen(from, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *bytes = malloc((size_t)n);
  assert_int_equal(fread(bytes, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  const char *mine = esmt_version_string();
  const size_t len = strlen(mine) + 1; /* with its NUL: the string, not a prefix */
  int found = 0;
  for (long i = 0; i + (long)len <= n; i++)
    if (memcmp(bytes + i, mine, len) == 0) {
      memset(bytes + i, '9', len - 1);
      found++;
    }
  assert_int_equal(found, 1);
  write_file(to, bytes, (size_t)n);
  free(bytes);
  esmt_context *ctx;
  assert_int_equal(create_with(dir, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "refused: built for libesmtrain 99999"));
  assert_non_null(strstr(esmt_last_error(), "a plugin of another installation"));
  test_rmtree(dir);
}

static void test_never_current_directory(void **state) {
  (void)state;
  const char *tmp = test_mkdtemp();
  char empty[512], cwd_before[1024];
  snprintf(empty, sizeof empty, "%s/empty", tmp);
  assert_int_equal(mkdir(empty, 0755), 0);
  stage_cpu(tmp); /* a perfectly good backend in the current directory */
  assert_non_null(getcwd(cwd_before, sizeof cwd_before));
  assert_int_equal(chdir(tmp), 0);
  esmt_context *ctx;
  /* Relative names and empty components must not make the cwd searched. */
  assert_int_equal(create_with("empty::", NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_int_equal(create_with(empty, NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_int_equal(chdir(cwd_before), 0);
  test_rmtree(tmp);
}

static void test_forcing(void **state) {
  (void)state;
  esmt_context *ctx;
  assert_int_equal(create_with(test_backend_dir(), "cpu", &ctx), ESMT_OK);
  assert_string_equal(esmt_context_backend_name(ctx), "cpu");
  esmt_context_destroy(ctx);
  assert_int_equal(create_with(test_backend_dir(), "quantum", &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "'quantum'"));
  assert_non_null(strstr(esmt_last_error(), "not found"));
  assert_non_null(strstr(esmt_last_error(), "cpu (available)"));
  setenv("ESMTRAIN_BACKEND", "quantum", 1);
  assert_int_equal(create_with(test_backend_dir(), NULL, &ctx), ESMT_ERR_NO_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "ESMTRAIN_BACKEND"));
  setenv("ESMTRAIN_BACKEND", "cpu", 1);
  assert_int_equal(create_with(test_backend_dir(), NULL, &ctx), ESMT_OK);
  esmt_context_destroy(ctx);
  unsetenv("ESMTRAIN_BACKEND");
}

static int machine_has_nvidia_driver(void) {
  return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

/* Default search (next to the library in the build tree): every backend
 * built here loads; without a GPU driver every GPU backend is unavailable
 * with a reason, and cpu is chosen. */
static void test_default_search_no_gpu(void **state) {
  (void)state;
  esmt_context *ctx;
  assert_int_equal(create_with(NULL, NULL, &ctx), ESMT_OK);
  int n = 0;
  assert_int_equal(esmt_context_backend_count(ctx, &n), ESMT_OK);
  assert_true(n >= 1);
  esmt_backend_info info;
  assert_true(find_entry(ctx, "/cpu.so", &info) >= 0);
  assert_true(info.available);
  assert_int_equal(info.device_count, 1);
  assert_true(info.devices[0].total_bytes > 0);
  if (machine_has_nvidia_driver()) {
    print_message("note: NVIDIA driver present; the no-GPU choice is not asserted here\n");
  } else {
    assert_string_equal(esmt_context_backend_name(ctx), "cpu");
    for (int i = 0; i < n; i++) {
      info.struct_size = sizeof info;
      assert_int_equal(esmt_context_backend_info(ctx, i, &info), ESMT_OK);
      if (strcmp(info.name, "cpu") == 0) continue;
      assert_false(info.available);
      assert_int_equal(info.score, 0);
      assert_true(strlen(info.reason) > 0);
      print_message("%s: %s\n", info.name, info.reason);
    }
    /* Forcing an unavailable GPU backend is a clear error. */
    if (find_entry(ctx, "/ampere_bf16.so", &info) >= 0) {
      esmt_context *c2;
      assert_int_equal(create_with(NULL, "ampere_bf16", &c2), ESMT_ERR_NO_BACKEND);
      assert_non_null(strstr(esmt_last_error(), "unavailable"));
    }
  }
  esmt_context_destroy(ctx);
}

int main(void) {
  unsetenv("ESMTRAIN_BACKEND");
  unsetenv("ESMTRAIN_BACKEND_PATH");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrong_abi_refused),
      cmocka_unit_test(test_shadowed_backend_listed),
      cmocka_unit_test(test_other_installation_refused),
      cmocka_unit_test(test_garbage_file_skipped),
      cmocka_unit_test(test_forced_maps_only_its_plugin),
      cmocka_unit_test(test_missing_dependency_named),
      cmocka_unit_test(test_only_garbage_is_error),
      cmocka_unit_test(test_empty_and_missing_dirs),
      cmocka_unit_test(test_env_path_and_precedence),
      cmocka_unit_test(test_never_current_directory),
      cmocka_unit_test(test_forcing),
      cmocka_unit_test(test_default_search_no_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
