file(REMOVE_RECURSE
  "../bin/test_infer"
  "../bin/test_infer.pdb"
  "CMakeFiles/test_infer.dir/test_infer.c.o"
  "CMakeFiles/test_infer.dir/test_infer.c.o.d"
  "CMakeFiles/test_infer.dir/test_util.c.o"
  "CMakeFiles/test_infer.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_infer.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
