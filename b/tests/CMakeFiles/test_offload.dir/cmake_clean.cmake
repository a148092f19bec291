file(REMOVE_RECURSE
  "../bin/test_offload"
  "../bin/test_offload.pdb"
  "CMakeFiles/test_offload.dir/half_emu_backend.c.o"
  "CMakeFiles/test_offload.dir/half_emu_backend.c.o.d"
  "CMakeFiles/test_offload.dir/micro_batch_fixture.c.o"
  "CMakeFiles/test_offload.dir/micro_batch_fixture.c.o.d"
  "CMakeFiles/test_offload.dir/test_offload.c.o"
  "CMakeFiles/test_offload.dir/test_offload.c.o.d"
  "CMakeFiles/test_offload.dir/test_util.c.o"
  "CMakeFiles/test_offload.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_offload.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
