# Empty dependencies file for test_mixed_precision.
# This may be replaced when dependencies are built.
