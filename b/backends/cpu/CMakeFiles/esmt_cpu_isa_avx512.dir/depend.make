# Empty dependencies file for esmt_cpu_isa_avx512.
# This may be replaced when dependencies are built.
