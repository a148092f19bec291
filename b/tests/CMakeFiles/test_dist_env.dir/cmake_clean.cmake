file(REMOVE_RECURSE
  "../bin/test_dist_env"
  "../bin/test_dist_env.pdb"
  "CMakeFiles/test_dist_env.dir/test_dist_env.c.o"
  "CMakeFiles/test_dist_env.dir/test_dist_env.c.o.d"
  "CMakeFiles/test_dist_env.dir/test_util.c.o"
  "CMakeFiles/test_dist_env.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dist_env.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
