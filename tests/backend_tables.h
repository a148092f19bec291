/* SPDX-License-Identifier: MIT */
/* In-process test backends (fake_dp_backend.c, half_emu_backend.c) wrap
 * the cpu backend's ops and replace some: they split its resolved table
 * into the ABI 2 groups a plugin hands out, change what they need, and
 * resolve that through the core's own esmt_ops_resolve, as the registry
 * does for a plugin. */
#ifndef BACKEND_TABLES_H
#define BACKEND_TABLES_H

#include "esmtrain/backend.h"
#include "ops_table.h"

typedef struct test_backend_tables {
  esmtb_backend backend;
  esmtb_device_ops device;
  esmtb_compute_ops compute;
  esmtb_optimizer_ops optimizer;
  esmtb_comm_ops comm;
  int has_optimizer, has_comm; /* which optional groups group() hands out */
} test_backend_tables;

/* The groups of `flat` (a resolved table), with its name, caps and probe;
 * the optional groups only where `flat` has one of their ops. */
void test_tables_split(const esmtb_ops *flat, test_backend_tables *t);

/* esmt_ops_resolve(t's backend) into `out`; fails the test on a refusal.
 * One set of tables at a time answers group() (static storage). */
const esmtb_ops *test_tables_resolve(const test_backend_tables *t, esmtb_ops *out);

#endif
