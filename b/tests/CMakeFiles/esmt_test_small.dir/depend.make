# Empty dependencies file for esmt_test_small.
# This may be replaced when dependencies are built.
