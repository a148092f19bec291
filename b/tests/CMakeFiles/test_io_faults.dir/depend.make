# Empty dependencies file for test_io_faults.
# This may be replaced when dependencies are built.
