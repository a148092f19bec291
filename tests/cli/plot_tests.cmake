# SPDX-License-Identifier: MIT
# esmtrain-example plot on two tiny real runs: PNG size and content, SVG
# well-formed, an existing file kept, errors and exit codes (python3 checks
# the images). Exit 77, a skip, when the CLI was built without cairo.
add_test(NAME plot_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_plot.sh
         $<TARGET_FILE:esmtrain-example>)
set_tests_properties(plot_cli PROPERTIES ENVIRONMENT "${ESMT_TEST_ENV}" SKIP_RETURN_CODE 77
                     TIMEOUT 180)
