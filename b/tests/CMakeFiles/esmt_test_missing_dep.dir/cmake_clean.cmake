file(REMOVE_RECURSE
  "CMakeFiles/esmt_test_missing_dep.dir/plugins/missing_dep.c.o"
  "CMakeFiles/esmt_test_missing_dep.dir/plugins/missing_dep.c.o.d"
  "plugins-missing/needs_missing_lib.pdb"
  "plugins-missing/needs_missing_lib.so"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_test_missing_dep.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
