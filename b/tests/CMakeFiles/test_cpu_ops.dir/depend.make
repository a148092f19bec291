# Empty dependencies file for test_cpu_ops.
# This may be replaced when dependencies are built.
