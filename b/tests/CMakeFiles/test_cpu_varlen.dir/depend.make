# Empty dependencies file for test_cpu_varlen.
# This may be replaced when dependencies are built.
