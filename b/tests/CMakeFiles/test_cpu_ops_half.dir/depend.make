# Empty dependencies file for test_cpu_ops_half.
# This may be replaced when dependencies are built.
