file(REMOVE_RECURSE
  "../bin/test_gpu_offload"
  "../bin/test_gpu_offload.pdb"
  "CMakeFiles/test_gpu_offload.dir/gpu/test_gpu_offload.c.o"
  "CMakeFiles/test_gpu_offload.dir/gpu/test_gpu_offload.c.o.d"
  "CMakeFiles/test_gpu_offload.dir/test_util.c.o"
  "CMakeFiles/test_gpu_offload.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_gpu_offload.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
