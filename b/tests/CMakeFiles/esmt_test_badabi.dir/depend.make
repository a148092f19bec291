# Empty dependencies file for esmt_test_badabi.
# This may be replaced when dependencies are built.
