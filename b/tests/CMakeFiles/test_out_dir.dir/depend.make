# Empty dependencies file for test_out_dir.
# This may be replaced when dependencies are built.
