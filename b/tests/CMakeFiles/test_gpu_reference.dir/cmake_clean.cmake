file(REMOVE_RECURSE
  "../bin/test_gpu_reference"
  "../bin/test_gpu_reference.pdb"
  "CMakeFiles/test_gpu_reference.dir/gpu/test_gpu_reference.c.o"
  "CMakeFiles/test_gpu_reference.dir/gpu/test_gpu_reference.c.o.d"
  "CMakeFiles/test_gpu_reference.dir/mem_source.c.o"
  "CMakeFiles/test_gpu_reference.dir/mem_source.c.o.d"
  "CMakeFiles/test_gpu_reference.dir/reference_fixture.c.o"
  "CMakeFiles/test_gpu_reference.dir/reference_fixture.c.o.d"
  "CMakeFiles/test_gpu_reference.dir/test_util.c.o"
  "CMakeFiles/test_gpu_reference.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_gpu_reference.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
