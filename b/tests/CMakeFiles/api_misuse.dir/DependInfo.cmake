
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/tests/bad_inputs/api_misuse.c" "tests/CMakeFiles/api_misuse.dir/bad_inputs/api_misuse.c.o" "gcc" "tests/CMakeFiles/api_misuse.dir/bad_inputs/api_misuse.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  "/work/wip19/b/libesmtrain/CMakeFiles/esmtrain.dir/DependInfo.cmake"
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
