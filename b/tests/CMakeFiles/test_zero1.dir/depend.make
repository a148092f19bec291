# Empty dependencies file for test_zero1.
# This may be replaced when dependencies are built.
