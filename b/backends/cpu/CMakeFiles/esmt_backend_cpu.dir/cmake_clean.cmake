file(REMOVE_RECURSE
  "../../lib/esmtrain/backends/cpu.pdb"
  "../../lib/esmtrain/backends/cpu.so"
  "CMakeFiles/esmt_backend_cpu.dir/__/backend_version.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/__/backend_version.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_backend.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_backend.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_blas.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_blas.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_half.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_half.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_isa.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_isa.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_segs.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/cpu_segs.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_adamw.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_adamw.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_attention.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_attention.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_elementwise.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_elementwise.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_embed.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_embed.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_gemm.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_gemm.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_layernorm.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_layernorm.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_lion.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_lion.c.o.d"
  "CMakeFiles/esmt_backend_cpu.dir/ops_xent.c.o"
  "CMakeFiles/esmt_backend_cpu.dir/ops_xent.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_backend_cpu.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
