file(REMOVE_RECURSE
  "../bin/test_checkpoint_checks"
  "../bin/test_checkpoint_checks.pdb"
  "CMakeFiles/test_checkpoint_checks.dir/test_checkpoint_checks.c.o"
  "CMakeFiles/test_checkpoint_checks.dir/test_checkpoint_checks.c.o.d"
  "CMakeFiles/test_checkpoint_checks.dir/test_util.c.o"
  "CMakeFiles/test_checkpoint_checks.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_checkpoint_checks.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
