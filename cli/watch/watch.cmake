# SPDX-License-Identifier: MIT
# The watch command's sources (added to esmtrain-example): the command and
# its loops, the terminal, the screen's lines, sparklines and number formats.
target_sources(esmtrain-example PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cmd_watch.c
  ${CMAKE_CURRENT_LIST_DIR}/watch_run_state.c
  ${CMAKE_CURRENT_LIST_DIR}/watch_screen.c
  ${CMAKE_CURRENT_LIST_DIR}/watch_spark.c
  ${CMAKE_CURRENT_LIST_DIR}/watch_term.c)
