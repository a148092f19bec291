# Empty dependencies file for test_data_parallel.
# This may be replaced when dependencies are built.
