file(REMOVE_RECURSE
  "CMakeFiles/esmt_cpu_isa_avx512.dir/isa_attention.c.o"
  "CMakeFiles/esmt_cpu_isa_avx512.dir/isa_attention.c.o.d"
  "CMakeFiles/esmt_cpu_isa_avx512.dir/isa_elementwise.c.o"
  "CMakeFiles/esmt_cpu_isa_avx512.dir/isa_elementwise.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_cpu_isa_avx512.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
