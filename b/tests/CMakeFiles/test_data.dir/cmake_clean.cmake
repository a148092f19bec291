file(REMOVE_RECURSE
  "../bin/test_data"
  "../bin/test_data.pdb"
  "CMakeFiles/test_data.dir/test_data.c.o"
  "CMakeFiles/test_data.dir/test_data.c.o.d"
  "CMakeFiles/test_data.dir/test_util.c.o"
  "CMakeFiles/test_data.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_data.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
