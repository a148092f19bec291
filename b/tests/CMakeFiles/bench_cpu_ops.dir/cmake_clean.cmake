file(REMOVE_RECURSE
  "../bin/bench_cpu_ops"
  "../bin/bench_cpu_ops.pdb"
  "CMakeFiles/bench_cpu_ops.dir/bench/bench_cpu_ops.c.o"
  "CMakeFiles/bench_cpu_ops.dir/bench/bench_cpu_ops.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/bench_cpu_ops.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
