
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/backends/backend_version.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/__/backend_version.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/__/backend_version.c.o.d"
  "/work/wip19/backends/cpu/cpu_backend.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_backend.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_backend.c.o.d"
  "/work/wip19/backends/cpu/cpu_blas.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_blas.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_blas.c.o.d"
  "/work/wip19/backends/cpu/cpu_half.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_half.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_half.c.o.d"
  "/work/wip19/backends/cpu/cpu_isa.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_isa.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_isa.c.o.d"
  "/work/wip19/backends/cpu/cpu_segs.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_segs.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/cpu_segs.c.o.d"
  "/work/wip19/backends/cpu/ops_adamw.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_adamw.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_adamw.c.o.d"
  "/work/wip19/backends/cpu/ops_attention.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_attention.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_attention.c.o.d"
  "/work/wip19/backends/cpu/ops_elementwise.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_elementwise.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_elementwise.c.o.d"
  "/work/wip19/backends/cpu/ops_embed.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_embed.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_embed.c.o.d"
  "/work/wip19/backends/cpu/ops_gemm.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_gemm.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_gemm.c.o.d"
  "/work/wip19/backends/cpu/ops_layernorm.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_layernorm.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_layernorm.c.o.d"
  "/work/wip19/backends/cpu/ops_lion.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_lion.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_lion.c.o.d"
  "/work/wip19/backends/cpu/ops_xent.c" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_xent.c.o" "gcc" "backends/cpu/CMakeFiles/esmt_backend_cpu.dir/ops_xent.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
