file(REMOVE_RECURSE
  "../bin/test_cpu_varlen"
  "../bin/test_cpu_varlen.pdb"
  "CMakeFiles/test_cpu_varlen.dir/cpu_ops_common.c.o"
  "CMakeFiles/test_cpu_varlen.dir/cpu_ops_common.c.o.d"
  "CMakeFiles/test_cpu_varlen.dir/test_cpu_varlen.c.o"
  "CMakeFiles/test_cpu_varlen.dir/test_cpu_varlen.c.o.d"
  "CMakeFiles/test_cpu_varlen.dir/test_util.c.o"
  "CMakeFiles/test_cpu_varlen.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_cpu_varlen.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
