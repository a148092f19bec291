# Empty dependencies file for test_offload.
# This may be replaced when dependencies are built.
