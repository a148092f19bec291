
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/tests/test_infer.c" "tests/CMakeFiles/test_infer.dir/test_infer.c.o" "gcc" "tests/CMakeFiles/test_infer.dir/test_infer.c.o.d"
  "/work/wip19/tests/test_util.c" "tests/CMakeFiles/test_infer.dir/test_util.c.o" "gcc" "tests/CMakeFiles/test_infer.dir/test_util.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/wip19/b/libesmtrain/CMakeFiles/esmtrain_internal.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
