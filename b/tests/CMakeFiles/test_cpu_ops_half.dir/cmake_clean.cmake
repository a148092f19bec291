file(REMOVE_RECURSE
  "../bin/test_cpu_ops_half"
  "../bin/test_cpu_ops_half.pdb"
  "CMakeFiles/test_cpu_ops_half.dir/cpu_ops_common.c.o"
  "CMakeFiles/test_cpu_ops_half.dir/cpu_ops_common.c.o.d"
  "CMakeFiles/test_cpu_ops_half.dir/test_cpu_ops_half.c.o"
  "CMakeFiles/test_cpu_ops_half.dir/test_cpu_ops_half.c.o.d"
  "CMakeFiles/test_cpu_ops_half.dir/test_util.c.o"
  "CMakeFiles/test_cpu_ops_half.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cpu_ops_half.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
