#----------------------------------------------------------------
# Generated CMake target import file for configuration "Release".
#----------------------------------------------------------------

# Commands may need to know the format version.
set(CMAKE_IMPORT_FILE_VERSION 1)

# Import target "esmtrain::esmtrain" for configuration "Release"
set_property(TARGET esmtrain::esmtrain APPEND PROPERTY IMPORTED_CONFIGURATIONS RELEASE)
set_target_properties(esmtrain::esmtrain PROPERTIES
  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/lib/libesmtrain.so.0.2.0"
  IMPORTED_SONAME_RELEASE "libesmtrain.so.0.2"
  )

list(APPEND _cmake_import_check_targets esmtrain::esmtrain )
list(APPEND _cmake_import_check_files_for_esmtrain::esmtrain "${_IMPORT_PREFIX}/lib/libesmtrain.so.0.2.0" )

# Commands beyond this point should not need to know the version.
set(CMAKE_IMPORT_FILE_VERSION)
