file(REMOVE_RECURSE
  "../bin/test_dp_device"
  "../bin/test_dp_device.pdb"
  "CMakeFiles/test_dp_device.dir/fake_dp_backend.c.o"
  "CMakeFiles/test_dp_device.dir/fake_dp_backend.c.o.d"
  "CMakeFiles/test_dp_device.dir/mem_source.c.o"
  "CMakeFiles/test_dp_device.dir/mem_source.c.o.d"
  "CMakeFiles/test_dp_device.dir/rank_runner.c.o"
  "CMakeFiles/test_dp_device.dir/rank_runner.c.o.d"
  "CMakeFiles/test_dp_device.dir/test_dp_device.c.o"
  "CMakeFiles/test_dp_device.dir/test_dp_device.c.o.d"
  "CMakeFiles/test_dp_device.dir/test_util.c.o"
  "CMakeFiles/test_dp_device.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_dp_device.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
