
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/cli/cli_config.c" "cli/CMakeFiles/esmtrain-example.dir/cli_config.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cli_config.c.o.d"
  "/work/wip19/cli/cli_numbers.c" "cli/CMakeFiles/esmtrain-example.dir/cli_numbers.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cli_numbers.c.o.d"
  "/work/wip19/cli/cli_signals.c" "cli/CMakeFiles/esmtrain-example.dir/cli_signals.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cli_signals.c.o.d"
  "/work/wip19/cli/cmd_bench.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench.c.o.d"
  "/work/wip19/cli/cmd_bench_adamw.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench_adamw.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench_adamw.c.o.d"
  "/work/wip19/cli/cmd_bench_loader.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench_loader.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_bench_loader.c.o.d"
  "/work/wip19/cli/cmd_ingest.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_ingest.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_ingest.c.o.d"
  "/work/wip19/cli/cmd_interop.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_interop.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_interop.c.o.d"
  "/work/wip19/cli/cmd_launch.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_launch.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_launch.c.o.d"
  "/work/wip19/cli/cmd_plan.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_plan.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_plan.c.o.d"
  "/work/wip19/cli/cmd_probe.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_probe.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_probe.c.o.d"
  "/work/wip19/cli/cmd_train.c" "cli/CMakeFiles/esmtrain-example.dir/cmd_train.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/cmd_train.c.o.d"
  "/work/wip19/cli/main.c" "cli/CMakeFiles/esmtrain-example.dir/main.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/main.c.o.d"
  "/work/wip19/cli/run_dir.c" "cli/CMakeFiles/esmtrain-example.dir/run_dir.c.o" "gcc" "cli/CMakeFiles/esmtrain-example.dir/run_dir.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/wip19/b/libesmtrain/CMakeFiles/esmtrain.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
