file(REMOVE_RECURSE
  "../bin/test_config_read"
  "../bin/test_config_read.pdb"
  "CMakeFiles/test_config_read.dir/test_config_read.c.o"
  "CMakeFiles/test_config_read.dir/test_config_read.c.o.d"
  "CMakeFiles/test_config_read.dir/test_util.c.o"
  "CMakeFiles/test_config_read.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_config_read.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
