# SPDX-License-Identifier: MIT
# Tests of esmtrain-example watch: a live run under a pseudo-terminal (tmux),
# --plain through a pipe, --once; the GPU table too where the CUDA emulator's
# NVML is built. Skipped (77) without tmux.
set(ESMT_WATCH_NVML "")
set(ESMT_WATCH_ENV "")
if(TARGET esmt_emu_libnvidia-ml)
  set(ESMT_WATCH_NVML $<TARGET_FILE:esmt_emu_libnvidia-ml>)
  set(ESMT_WATCH_ENV "ESMT_EMU_DEVICES=0") # the trainer on the CPU, as in the other CLI tests
endif()
add_test(NAME watch_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_watch.sh
         $<TARGET_FILE:esmtrain-example> ${ESMT_WATCH_NVML})
set_tests_properties(watch_cli PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77
                     ENVIRONMENT "${ESMT_WATCH_ENV}")
