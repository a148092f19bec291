file(REMOVE_RECURSE
  "../bin/test_api"
  "../bin/test_api.pdb"
  "CMakeFiles/test_api.dir/test_api.c.o"
  "CMakeFiles/test_api.dir/test_api.c.o.d"
  "CMakeFiles/test_api.dir/test_util.c.o"
  "CMakeFiles/test_api.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_api.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
