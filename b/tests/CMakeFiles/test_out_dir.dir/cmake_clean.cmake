file(REMOVE_RECURSE
  "../bin/test_out_dir"
  "../bin/test_out_dir.pdb"
  "CMakeFiles/test_out_dir.dir/cpu_dir_fixture.c.o"
  "CMakeFiles/test_out_dir.dir/cpu_dir_fixture.c.o.d"
  "CMakeFiles/test_out_dir.dir/test_out_dir.c.o"
  "CMakeFiles/test_out_dir.dir/test_out_dir.c.o.d"
  "CMakeFiles/test_out_dir.dir/test_util.c.o"
  "CMakeFiles/test_out_dir.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_out_dir.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
