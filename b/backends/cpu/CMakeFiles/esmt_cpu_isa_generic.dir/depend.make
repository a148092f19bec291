# Empty dependencies file for esmt_cpu_isa_generic.
# This may be replaced when dependencies are built.
