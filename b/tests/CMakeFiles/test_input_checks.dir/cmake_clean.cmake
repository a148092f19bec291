file(REMOVE_RECURSE
  "../bin/test_input_checks"
  "../bin/test_input_checks.pdb"
  "CMakeFiles/test_input_checks.dir/test_input_checks.c.o"
  "CMakeFiles/test_input_checks.dir/test_input_checks.c.o.d"
  "CMakeFiles/test_input_checks.dir/test_util.c.o"
  "CMakeFiles/test_input_checks.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_input_checks.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
