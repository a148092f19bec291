
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/tests/cpu_ops_common.c" "tests/CMakeFiles/test_cpu_ops_half.dir/cpu_ops_common.c.o" "gcc" "tests/CMakeFiles/test_cpu_ops_half.dir/cpu_ops_common.c.o.d"
  "/work/wip19/tests/test_cpu_ops_half.c" "tests/CMakeFiles/test_cpu_ops_half.dir/test_cpu_ops_half.c.o" "gcc" "tests/CMakeFiles/test_cpu_ops_half.dir/test_cpu_ops_half.c.o.d"
  "/work/wip19/tests/test_util.c" "tests/CMakeFiles/test_cpu_ops_half.dir/test_util.c.o" "gcc" "tests/CMakeFiles/test_cpu_ops_half.dir/test_util.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
