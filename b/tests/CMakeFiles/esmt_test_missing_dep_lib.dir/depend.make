# Empty dependencies file for esmt_test_missing_dep_lib.
# This may be replaced when dependencies are built.
