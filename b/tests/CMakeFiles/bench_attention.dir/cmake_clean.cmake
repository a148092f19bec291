file(REMOVE_RECURSE
  "../bin/bench_attention"
  "../bin/bench_attention.pdb"
  "CMakeFiles/bench_attention.dir/bench/bench_attention.c.o"
  "CMakeFiles/bench_attention.dir/bench/bench_attention.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/bench_attention.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
