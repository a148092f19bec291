# Empty dependencies file for esmt_test_missing_dep.
# This may be replaced when dependencies are built.
