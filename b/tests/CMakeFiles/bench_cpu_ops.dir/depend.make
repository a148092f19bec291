# Empty dependencies file for bench_cpu_ops.
# This may be replaced when dependencies are built.
