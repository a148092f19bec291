// SPDX-License-Identifier: MIT
/* Backend ABI 2 (ops_resolve.c): a plugin's groups land in the core's flat
 * table; optional groups may be absent; a required group that is missing,
 * of another version or too short, and a table of another ABI major, are
 * refused with a reason that names them. */
#include "test_util.h"

#include <stdio.h>
#include <string.h>

#include "ops_table.h"

static esmtb_status op_probe(const esmtb_job *j, esmtb_probe *p) { (void)j; (void)p; return 0; }
static esmtb_status op_open(const esmtb_open_options *o, esmtb_device **d) {
  (void)o; (void)d; return 0;
}
static esmtb_status op_gemm(esmtb_device *d, const esmtb_gemm_args *a, esmtb_stream *s) {
  (void)d; (void)a; (void)s; return 0;
}
static esmtb_status op_lion(esmtb_device *d, const esmtb_lion_args *a, esmtb_stream *s) {
  (void)d; (void)a; (void)s; return 0;
}
static esmtb_status op_allgather(esmtb_device *d, const esmtb_shard_args *a, esmtb_stream *s) {
  (void)d; (void)a; (void)s; return 0;
}

static esmtb_device_ops g_device;
static esmtb_compute_ops g_compute;
static esmtb_optimizer_ops g_optimizer;
static esmtb_comm_ops g_comm;
static int g_offer_optional;
static char g_asked[256];

static const void *group(const char *name, uint32_t version) {
  strncat(g_asked, name, sizeof g_asked - strlen(g_asked) - 2);
  strcat(g_asked, " ");
  if (!strcmp(name, ESMTB_GROUP_DEVICE)) return version == g_device.version ? &g_device : NULL;
  if (!strcmp(name, ESMTB_GROUP_COMPUTE)) return &g_compute; /* whatever its version */
  if (!g_offer_optional) return NULL;
  if (!strcmp(name, ESMTB_GROUP_OPTIMIZER)) return &g_optimizer;
  if (!strcmp(name, ESMTB_GROUP_COMM)) return &g_comm;
  return NULL;
}

static esmtb_backend make_backend(void) {
  g_device = (esmtb_device_ops){.struct_size = sizeof g_device,
                                .version = ESMTB_DEVICE_OPS_VERSION, .open = op_open};
  g_compute = (esmtb_compute_ops){.struct_size = sizeof g_compute,
                                  .version = ESMTB_COMPUTE_OPS_VERSION, .gemm = op_gemm};
  g_optimizer = (esmtb_optimizer_ops){.struct_size = sizeof g_optimizer,
                                      .version = ESMTB_OPTIMIZER_OPS_VERSION, .lion = op_lion};
  g_comm = (esmtb_comm_ops){.struct_size = sizeof g_comm, .version = ESMTB_COMM_OPS_VERSION,
                            .allgather = op_allgather};
  g_offer_optional = 1;
  g_asked[0] = '\0';
  return (esmtb_backend){ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR, sizeof(esmtb_backend),
                         ESMTB_CAP_F32, "t", "test", op_probe, group};
}

static void expect_refused(const esmtb_backend *b, const char *fragment) {
  esmtb_ops ops;
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(b, &ops, why, sizeof why), ESMT_ERR_ABI);
  if (!strstr(why, fragment)) fail_msg("reason '%s' lacks '%s'", why, fragment);
}

static void test_groups_resolved(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  esmtb_ops ops;
  memset(&ops, 0xff, sizeof ops); /* every field not set by the resolver shows */
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_string_equal(g_asked, "device compute optimizer comm ");
  assert_string_equal(ops.name, "t");
  assert_int_equal(ops.caps, ESMTB_CAP_F32);
  assert_int_equal(ops.struct_size, sizeof ops);
  assert_ptr_equal(ops.probe, op_probe);
  assert_ptr_equal(ops.open, op_open);
  assert_ptr_equal(ops.gemm, op_gemm);
  assert_ptr_equal(ops.lion, op_lion);
  assert_ptr_equal(ops.allgather, op_allgather);
  assert_null(ops.close);
  assert_null(ops.adamw);
  assert_null(ops.allreduce);
  assert_null(ops.pci_bus_id);
}

static void test_optional_groups_absent(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  g_offer_optional = 0;
  esmtb_ops ops;
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.gemm, op_gemm);
  assert_null(ops.lion);
  assert_null(ops.allgather);
  /* an optional group of another version reads as absent, not refused */
  b = make_backend();
  g_comm.version = ESMTB_COMM_OPS_VERSION + 1;
  g_optimizer.struct_size = 8;
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_null(ops.allgather);
  assert_null(ops.lion);
}

static esmtb_status op_probs(esmtb_device *d, const esmtb_attention_args *a, esmtb_stream *s) {
  (void)d, (void)a, (void)s;
  return ESMTB_OK;
}

/* attention_probs (ABI 2.2) is read only from a compute group that covers
 * it: an older plugin's shorter table leaves it NULL, whatever lies past it. */
static void test_compute_2_2(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  g_compute.attention_probs = op_probs;
  esmtb_ops ops;
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.attention_probs, op_probs);
  b = make_backend();
  g_compute.attention_probs = op_probs;
  g_compute.struct_size = (uint32_t)offsetof(esmtb_compute_ops, attention_probs);
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.gemm, op_gemm);
  assert_null(ops.attention_probs);
}

static esmtb_status op_dropout(esmtb_device *d, const esmtb_dropout_args *a, esmtb_stream *s) {
  (void)d, (void)a, (void)s;
  return ESMTB_OK;
}

/* dropout (ABI 2.3) likewise: a 2.2 plugin's compute group ends before it. */
static void test_compute_2_3(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  g_compute.dropout = op_dropout;
  esmtb_ops ops;
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.dropout, op_dropout);
  b = make_backend();
  g_compute.attention_probs = op_probs;
  g_compute.dropout = op_dropout;
  g_compute.struct_size = (uint32_t)offsetof(esmtb_compute_ops, dropout);
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.attention_probs, op_probs);
  assert_null(ops.dropout);
}

static void test_required_groups(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  g_device.version = ESMTB_DEVICE_OPS_VERSION + 1; /* the backend answers NULL */
  expect_refused(&b, "group 'device' (version 1");
  expect_refused(&b, "is missing");
  b = make_backend();
  g_compute.version = ESMTB_COMPUTE_OPS_VERSION + 1; /* hands out another layout */
  expect_refused(&b, "group 'compute'");
  expect_refused(&b, "has another version");
  b = make_backend();
  g_compute.struct_size = 16;
  expect_refused(&b, "is too short");
  b = make_backend();
  b.group = NULL;
  expect_refused(&b, "group");
}

static void test_other_major_refused(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  b.abi_major = 1;
  b.abi_minor = 6;
  char want[96];
  snprintf(want, sizeof want, "built for backend ABI 1.6, this library speaks %d.%d",
           ESMTB_ABI_MAJOR, ESMTB_ABI_MINOR);
  expect_refused(&b, want);
  assert_string_equal(g_asked, ""); /* nothing else of it was read */
  b = make_backend();
  b.struct_size = (uint32_t)offsetof(esmtb_backend, group);
  expect_refused(&b, "smaller than");
}

static esmtb_status op_timing_event(esmtb_device *d, esmtb_event **e) {
  (void)d; (void)e;
  return 0;
}
static esmtb_status op_elapsed(esmtb_device *d, esmtb_event *a, esmtb_event *b, double *t) {
  (void)d; (void)a; (void)b; (void)t;
  return 0;
}

/* The timing events appended to the device group in 2.1 are taken when the
 * group's struct_size covers them, and left NULL for a 2.0-sized group
 * whatever lies past its end. */
static void test_appended_device_ops(void **state) {
  (void)state;
  esmtb_backend b = make_backend();
  g_device.timing_event_create = op_timing_event;
  g_device.event_elapsed = op_elapsed;
  esmtb_ops ops;
  char why[256] = "";
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_ptr_equal(ops.timing_event_create, op_timing_event);
  assert_ptr_equal(ops.event_elapsed, op_elapsed);
  g_device.struct_size = (uint32_t)(offsetof(esmtb_device_ops, event_sync) + sizeof(void *));
  assert_int_equal(esmt_ops_resolve(&b, &ops, why, sizeof why), ESMT_OK);
  assert_null(ops.timing_event_create);
  assert_null(ops.event_elapsed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_resolved),
      cmocka_unit_test(test_optional_groups_absent),
      cmocka_unit_test(test_compute_2_2),
      cmocka_unit_test(test_compute_2_3),
      cmocka_unit_test(test_required_groups),
      cmocka_unit_test(test_other_major_refused),
      cmocka_unit_test(test_appended_device_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
