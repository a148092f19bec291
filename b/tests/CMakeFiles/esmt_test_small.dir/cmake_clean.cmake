file(REMOVE_RECURSE
  "CMakeFiles/esmt_test_small.dir/plugins/small_table.c.o"
  "CMakeFiles/esmt_test_small.dir/plugins/small_table.c.o.d"
  "plugins/small_table.pdb"
  "plugins/small_table.so"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_test_small.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
