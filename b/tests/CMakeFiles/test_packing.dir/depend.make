# Empty dependencies file for test_packing.
# This may be replaced when dependencies are built.
