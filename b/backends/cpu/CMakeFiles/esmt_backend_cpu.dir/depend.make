# Empty dependencies file for esmt_backend_cpu.
# This may be replaced when dependencies are built.
