# Empty dependencies file for test_recompute.
# This may be replaced when dependencies are built.
