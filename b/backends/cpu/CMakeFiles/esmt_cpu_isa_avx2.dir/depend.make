# Empty dependencies file for esmt_cpu_isa_avx2.
# This may be replaced when dependencies are built.
