# Empty dependencies file for test_gpu_offload.
# This may be replaced when dependencies are built.
