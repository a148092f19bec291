# Empty dependencies file for bench_attention.
# This may be replaced when dependencies are built.
