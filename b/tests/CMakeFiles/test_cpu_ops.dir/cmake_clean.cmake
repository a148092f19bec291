file(REMOVE_RECURSE
  "../bin/test_cpu_ops"
  "../bin/test_cpu_ops.pdb"
  "CMakeFiles/test_cpu_ops.dir/cpu_ops_common.c.o"
  "CMakeFiles/test_cpu_ops.dir/cpu_ops_common.c.o.d"
  "CMakeFiles/test_cpu_ops.dir/test_cpu_ops.c.o"
  "CMakeFiles/test_cpu_ops.dir/test_cpu_ops.c.o.d"
  "CMakeFiles/test_cpu_ops.dir/test_util.c.o"
  "CMakeFiles/test_cpu_ops.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cpu_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
