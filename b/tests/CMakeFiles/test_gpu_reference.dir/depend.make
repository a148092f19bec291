# Empty dependencies file for test_gpu_reference.
# This may be replaced when dependencies are built.
