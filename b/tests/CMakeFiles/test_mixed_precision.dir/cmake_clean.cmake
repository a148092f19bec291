file(REMOVE_RECURSE
  "../bin/test_mixed_precision"
  "../bin/test_mixed_precision.pdb"
  "CMakeFiles/test_mixed_precision.dir/mixed_compare.c.o"
  "CMakeFiles/test_mixed_precision.dir/mixed_compare.c.o.d"
  "CMakeFiles/test_mixed_precision.dir/test_mixed_precision.c.o"
  "CMakeFiles/test_mixed_precision.dir/test_mixed_precision.c.o.d"
  "CMakeFiles/test_mixed_precision.dir/test_util.c.o"
  "CMakeFiles/test_mixed_precision.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_mixed_precision.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
