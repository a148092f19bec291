# SPDX-License-Identifier: MIT
# The plot command (esmtrain-example plot): drawn with cairo when pkg-config
# finds it (Debian: libcairo2-dev); without it, or with -DESMT_WITH_PLOT=OFF,
# only cmd_plot.c is built and `plot` says that this build has no cairo.
option(ESMT_WITH_PLOT "Build the plot command with cairo when it is found" ON)
if(ESMT_WITH_PLOT)
  pkg_check_modules(CAIRO QUIET IMPORTED_TARGET cairo)
  # fontconfig (under cairo's text): only to release its caches at the end
  pkg_check_modules(FONTCONFIG QUIET IMPORTED_TARGET fontconfig)
endif()
target_sources(esmtrain-example PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_plot.c)
if(ESMT_WITH_PLOT AND CAIRO_FOUND)
  target_sources(esmtrain-example PRIVATE
                 ${CMAKE_CURRENT_LIST_DIR}/plot_data.c ${CMAKE_CURRENT_LIST_DIR}/plot_draw.c
                 ${CMAKE_CURRENT_LIST_DIR}/plot_panel.c
                 ${CMAKE_CURRENT_LIST_DIR}/plot_render.c ${CMAKE_CURRENT_LIST_DIR}/plot_ticks.c
                 ${CMAKE_CURRENT_LIST_DIR}/plot_signature.c
                 ${CMAKE_CURRENT_LIST_DIR}/plot_contact_map.c)
  target_link_libraries(esmtrain-example PRIVATE PkgConfig::CAIRO)
  target_compile_definitions(esmtrain-example PRIVATE ESMT_HAVE_CAIRO=1)
  if(FONTCONFIG_FOUND)
    target_link_libraries(esmtrain-example PRIVATE PkgConfig::FONTCONFIG)
    target_compile_definitions(esmtrain-example PRIVATE ESMT_HAVE_FONTCONFIG=1)
  endif()
  message(STATUS "esmtrain-example plot: with cairo ${CAIRO_VERSION}")
else()
  message(STATUS "esmtrain-example plot: without cairo (plot says so; libcairo2-dev enables it)")
endif()
