file(REMOVE_RECURSE
  "CMakeFiles/esmt_test_missing_dep_lib.dir/plugins/missing_dep_lib.c.o"
  "CMakeFiles/esmt_test_missing_dep_lib.dir/plugins/missing_dep_lib.c.o.d"
  "hidden-lib/libesmt_missing_dep.pdb"
  "hidden-lib/libesmt_missing_dep.so"
  "hidden-lib/libesmt_missing_dep.so.1"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_test_missing_dep_lib.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
