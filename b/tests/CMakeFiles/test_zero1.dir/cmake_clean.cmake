file(REMOVE_RECURSE
  "../bin/test_zero1"
  "../bin/test_zero1.pdb"
  "CMakeFiles/test_zero1.dir/half_emu_backend.c.o"
  "CMakeFiles/test_zero1.dir/half_emu_backend.c.o.d"
  "CMakeFiles/test_zero1.dir/mem_source.c.o"
  "CMakeFiles/test_zero1.dir/mem_source.c.o.d"
  "CMakeFiles/test_zero1.dir/rank_runner.c.o"
  "CMakeFiles/test_zero1.dir/rank_runner.c.o.d"
  "CMakeFiles/test_zero1.dir/test_util.c.o"
  "CMakeFiles/test_zero1.dir/test_util.c.o.d"
  "CMakeFiles/test_zero1.dir/test_zero1.c.o"
  "CMakeFiles/test_zero1.dir/test_zero1.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_zero1.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
