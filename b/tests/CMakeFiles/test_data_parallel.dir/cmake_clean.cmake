file(REMOVE_RECURSE
  "../bin/test_data_parallel"
  "../bin/test_data_parallel.pdb"
  "CMakeFiles/test_data_parallel.dir/mem_source.c.o"
  "CMakeFiles/test_data_parallel.dir/mem_source.c.o.d"
  "CMakeFiles/test_data_parallel.dir/rank_runner.c.o"
  "CMakeFiles/test_data_parallel.dir/rank_runner.c.o.d"
  "CMakeFiles/test_data_parallel.dir/test_data_parallel.c.o"
  "CMakeFiles/test_data_parallel.dir/test_data_parallel.c.o.d"
  "CMakeFiles/test_data_parallel.dir/test_util.c.o"
  "CMakeFiles/test_data_parallel.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_data_parallel.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
