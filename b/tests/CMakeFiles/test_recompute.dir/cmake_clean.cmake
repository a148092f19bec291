file(REMOVE_RECURSE
  "../bin/test_recompute"
  "../bin/test_recompute.pdb"
  "CMakeFiles/test_recompute.dir/micro_batch_fixture.c.o"
  "CMakeFiles/test_recompute.dir/micro_batch_fixture.c.o.d"
  "CMakeFiles/test_recompute.dir/test_recompute.c.o"
  "CMakeFiles/test_recompute.dir/test_recompute.c.o.d"
  "CMakeFiles/test_recompute.dir/test_util.c.o"
  "CMakeFiles/test_recompute.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_recompute.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
