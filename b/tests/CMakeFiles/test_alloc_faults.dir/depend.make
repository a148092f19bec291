# Empty dependencies file for test_alloc_faults.
# This may be replaced when dependencies are built.
