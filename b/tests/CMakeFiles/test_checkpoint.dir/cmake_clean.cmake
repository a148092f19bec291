file(REMOVE_RECURSE
  "../bin/test_checkpoint"
  "../bin/test_checkpoint.pdb"
  "CMakeFiles/test_checkpoint.dir/test_checkpoint.c.o"
  "CMakeFiles/test_checkpoint.dir/test_checkpoint.c.o.d"
  "CMakeFiles/test_checkpoint.dir/test_util.c.o"
  "CMakeFiles/test_checkpoint.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_checkpoint.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
