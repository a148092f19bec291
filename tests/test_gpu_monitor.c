/* SPDX-License-Identifier: MIT */
/* esmt_gpu_sample_all and the trainer's NVML lookup by PCI bus id. NVML is
 * loaded once per process, so each ctest entry runs one situation, named by
 * ESMT_TEST_NVML:
 *   absent - ESMT_NVML_LIBRARY names a file that does not exist (CI without
 *            GPU): a clear ESMT_ERR_UNSUPPORTED, no devices;
 *   emu    - the CUDA emulator's libnvidia-ml.so.1 stand-in with
 *            ESMT_EMU_DEVICES=2 (emulated build): the figures it gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_monitor.h"
#include "test_util.h"

static const char *mode(void) {
  const char *m = getenv("ESMT_TEST_NVML");
  return m ? m : "absent";
}

static void test_arguments(void **state) {
  (void)state;
  esmt_gpu_sample s[2] = {ESMT_GPU_SAMPLE_INIT, ESMT_GPU_SAMPLE_INIT};
  assert_int_equal(esmt_gpu_sample_all(s, 2, NULL), ESMT_ERR_INVALID_ARGUMENT);
  int n = 7;
  assert_int_equal(esmt_gpu_sample_all(NULL, 1, &n), ESMT_ERR_INVALID_ARGUMENT);
  assert_int_equal(n, 0);
  s[0].struct_size = 8; /* older than any version */
  assert_int_equal(esmt_gpu_sample_all(s, 1, &n), ESMT_ERR_ABI);
  esmt_gpu_sample one = ESMT_GPU_SAMPLE_INIT;
  assert_int_equal(esmt_gpu_sample_bus_id(NULL, &one), ESMT_ERR_INVALID_ARGUMENT);
}

static void test_absent(void **state) {
  (void)state;
  if (strcmp(mode(), "absent")) skip();
  esmt_gpu_sample s = ESMT_GPU_SAMPLE_INIT;
  int n = 5;
  assert_int_equal(esmt_gpu_sample_all(&s, 1, &n), ESMT_ERR_UNSUPPORTED);
  assert_int_equal(n, 0);
  assert_non_null(strstr(esmt_last_error(), "not on this machine"));
  assert_non_null(strstr(esmt_last_error(), getenv("ESMT_NVML_LIBRARY")));
  assert_int_equal(esmt_gpu_sample_all(NULL, 0, &n), ESMT_ERR_UNSUPPORTED); /* again: same */
  assert_int_equal(esmt_gpu_sample_bus_id("0000:01:00.0", &s), ESMT_ERR_UNSUPPORTED);
}

static void test_emulated(void **state) {
  (void)state;
  if (strcmp(mode(), "emu")) skip();
  int n = 0;
  assert_int_equal(esmt_gpu_sample_all(NULL, 0, &n), ESMT_OK); /* count only */
  assert_int_equal(n, 2);
  esmt_gpu_sample s[3] = {ESMT_GPU_SAMPLE_INIT, ESMT_GPU_SAMPLE_INIT, ESMT_GPU_SAMPLE_INIT};
  assert_int_equal(esmt_gpu_sample_all(s, 3, &n), ESMT_OK);
  assert_int_equal(n, 2);
  for (int d = 0; d < 2; d++) {
    char id[32];
    snprintf(id, sizeof id, "00000000:%02X:00.0", d + 1);
    assert_int_equal(s[d].index, d);
    assert_true(s[d].name[0] != '\0');
    assert_string_equal(s[d].pci_bus_id, id);
    assert_true(s[d].util_percent == 42 + d);
    assert_true(s[d].memory_util_percent == 17);
    assert_true(s[d].temperature_c == 51 + d);
    assert_true(fabs(s[d].power_w - 187.5) < 1e-9);
    assert_true(s[d].memory_total_bytes == (uint64_t)16 << 30); /* ESMT_EMU_MEM default */
  }
  /* CUDA's spelling (4-digit domain, any case) finds the same device */
  esmt_gpu_sample one = ESMT_GPU_SAMPLE_INIT;
  assert_int_equal(esmt_gpu_sample_bus_id("0000:02:00.0", &one), ESMT_OK);
  assert_true(one.util_percent == 43);
  assert_int_equal(esmt_gpu_sample_bus_id("0000:7f:00.0", &one), ESMT_ERR_BACKEND);
  assert_non_null(strstr(esmt_last_error(), "0000:7f:00.0"));
  /* nothing past struct_size is written */
  struct {
    esmt_gpu_sample head;
    char guard[8];
  } old;
  memset(&old, 0x5a, sizeof old);
  old.head.struct_size = (uint32_t)(offsetof(esmt_gpu_sample, power_w) + sizeof(double));
  assert_int_equal(esmt_gpu_sample_all(&old.head, 1, &n), ESMT_OK);
  for (size_t i = 0; i < sizeof old.guard; i++) assert_int_equal(old.guard[i], 0x5a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_absent),
      cmocka_unit_test(test_emulated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
