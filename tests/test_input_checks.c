/* SPDX-License-Identifier: MIT */
/* Input verification (issue #16): an input that is not a regular file (a
 * FIFO with no writer, a directory, a character device) is refused at once
 * with a message naming what it is, never blocked on. The helpers that
 * verify datasets, checkpoints and settings add their cases here. The host
 * memory probe sees an address-space limit and names it. */
#define _GNU_SOURCE
#include "test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include "host_memory.h"
#include "input_file.h"

#define g_dir test_tmpdir /* the group's temporary directory */

static void path_in(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", g_dir, name);
}

/* A FIFO with no writer: open(2) without O_NONBLOCK would never return. */
static void fifo_is_refused_without_blocking(void **state) {
  (void)state;
  char p[256];
  path_in(p, sizeof p, "fifo");
  assert_int_equal(mkfifo(p, 0600), 0);
  int fd = 123;
  assert_int_equal(esmt_open_input(p, "dataset shard", &fd, NULL), ESMT_ERR_FORMAT);
  assert_int_equal(fd, -1);
  assert_non_null(strstr(esmt_last_error(), "a FIFO (named pipe), not a regular file"));
  assert_non_null(strstr(esmt_last_error(), "dataset shard"));
  FILE *f = (FILE *)1;
  assert_int_equal(esmt_fopen_input(p, "manifest", &f), ESMT_ERR_FORMAT);
  assert_null(f);
  assert_int_equal(esmt_check_regular_input(p, "manifest"), ESMT_ERR_FORMAT);
}

static void directory_and_device_are_named(void **state) {
  (void)state;
  int fd;
  assert_int_equal(esmt_open_input(g_dir, "checkpoint weights", &fd, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "is a directory"));
  assert_int_equal(esmt_open_input("/dev/null", "checkpoint weights", &fd, NULL), ESMT_ERR_FORMAT);
  assert_non_null(strstr(esmt_last_error(), "a character device"));
}

static void missing_file_names_errno(void **state) {
  (void)state;
  char p[256];
  path_in(p, sizeof p, "absent");
  int fd;
  assert_int_equal(esmt_open_input(p, "state file", &fd, NULL), ESMT_ERR_IO);
  assert_non_null(strstr(esmt_last_error(), "No such file or directory"));
}

/* A regular file (also through a symlink) opens blocking, with its size. */
static void regular_file_opens_blocking(void **state) {
  (void)state;
  char p[256], l[256];
  path_in(p, sizeof p, "regular");
  path_in(l, sizeof l, "link");
  FILE *w = fopen(p, "wb");
  assert_non_null(w);
  fputs("hello", w);
  fclose(w);
  assert_int_equal(symlink(p, l), 0);
  int fd;
  struct stat sb;
  assert_int_equal(esmt_open_input(l, "state file", &fd, &sb), ESMT_OK);
  assert_int_equal(sb.st_size, 5);
  assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  close(fd);
  assert_int_equal(esmt_check_regular_input(p, "state file"), ESMT_OK);
}

/* In a child (the limit stays there): under ulimit -v 1 GiB the probe
 * reports at most what is left of it, names the limit, and a request for
 * 2 GiB is refused with both figures. */
static void host_memory_sees_the_address_space_limit(void **state) {
  (void)state;
  if (TEST_UNDER_ASAN) {
    print_message("skipped: AddressSanitizer's shadow memory cannot live under ulimit -v\n");
    skip();
  }
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {1ull << 30, 1ull << 30};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(10);
    esmt_host_memory m;
    esmt_host_memory_probe(&m);
    if (!(m.available < (1ull << 30))) _exit(11);
    if (!strstr(m.limited_by, "ulimit -v")) _exit(12);
    if (esmt_host_memory_check(2ull << 30, "a test buffer", "lower it") != ESMT_ERR_OUT_OF_MEMORY)
      _exit(13);
    if (!strstr(esmt_last_error(), "a test buffer needs at least 2.0 GiB of host memory"))
      _exit(14);
    if (esmt_host_memory_check(1u << 20, "a small buffer", "") != ESMT_OK) _exit(15);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fifo_is_refused_without_blocking),
      cmocka_unit_test(directory_and_device_are_named),
      cmocka_unit_test(missing_file_names_errno),
      cmocka_unit_test(regular_file_opens_blocking),
      cmocka_unit_test(host_memory_sees_the_address_space_limit),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
