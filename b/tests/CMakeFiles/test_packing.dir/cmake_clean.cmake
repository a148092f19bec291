file(REMOVE_RECURSE
  "../bin/test_packing"
  "../bin/test_packing.pdb"
  "CMakeFiles/test_packing.dir/test_packing.c.o"
  "CMakeFiles/test_packing.dir/test_packing.c.o.d"
  "CMakeFiles/test_packing.dir/test_util.c.o"
  "CMakeFiles/test_packing.dir/test_util.c.o.d"
  "CMakeFiles/test_packing.dir/trainer_fixture.c.o"
  "CMakeFiles/test_packing.dir/trainer_fixture.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_packing.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
