
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/tests/plugins/missing_dep.c" "tests/CMakeFiles/esmt_test_missing_dep.dir/plugins/missing_dep.c.o" "gcc" "tests/CMakeFiles/esmt_test_missing_dep.dir/plugins/missing_dep.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/wip19/b/tests/CMakeFiles/esmt_test_missing_dep_lib.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
