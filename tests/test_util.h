/* SPDX-License-Identifier: MIT */
/* Helpers shared by the cmocka suites. */
#ifndef ESMT_TEST_UTIL_H
#define ESMT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "esmtrain/backend.h"

/* The core's resolved table (libesmtrain/backend/ops_table.h). */
typedef struct esmtb_ops esmtb_ops;

/* $ESMT_TEST_BACKEND_DIR (set by ctest), or fails the test. */
const char *test_backend_dir(void);

/* $ESMT_TEST_SRC_DIR: the source tree root. */
const char *test_src_dir(void);

/* dlopen <backend dir>/<name>.so and return its groups resolved as the
 * core resolves them (backend_loader.c; host services print errors to
 * stderr). Fails the test when it cannot. */
const esmtb_ops *test_load_backend(const char *name);

/* The last message a backend loaded by test_load_backend reported. */
const char *test_backend_error(void);

/* Make a fresh empty temporary directory; returns a static path. */
const char *test_mkdtemp(void);

/* rm -rf a directory made by test_mkdtemp. */
void test_rmtree(const char *dir);

/* cmocka group setup/teardown for a suite that needs one temporary
 * directory of its own: test_tmpdir names it (a copy, not test_mkdtemp's
 * buffer) between the two. */
extern char test_tmpdir[256];
int test_tmpdir_setup(void **state);
int test_tmpdir_teardown(void **state);

/* Writes text to path, creating or truncating it (fails the test when it
 * cannot). */
void test_put_text(const char *path, const char *text);

/* The entries of dir besides . and .. (a temporary left behind shows
 * here); -1 when dir cannot be opened. */
int test_dir_entries(const char *dir);

/* 1 in a build with AddressSanitizer, whose shadow memory reserves
 * terabytes of address space: a test under `ulimit -v` cannot run there. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

#endif
