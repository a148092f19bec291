file(REMOVE_RECURSE
  "../bin/test_mixed_fake"
  "../bin/test_mixed_fake.pdb"
  "CMakeFiles/test_mixed_fake.dir/half_emu_backend.c.o"
  "CMakeFiles/test_mixed_fake.dir/half_emu_backend.c.o.d"
  "CMakeFiles/test_mixed_fake.dir/mixed_compare.c.o"
  "CMakeFiles/test_mixed_fake.dir/mixed_compare.c.o.d"
  "CMakeFiles/test_mixed_fake.dir/test_mixed_fake.c.o"
  "CMakeFiles/test_mixed_fake.dir/test_mixed_fake.c.o.d"
  "CMakeFiles/test_mixed_fake.dir/test_util.c.o"
  "CMakeFiles/test_mixed_fake.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_mixed_fake.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
