# Empty dependencies file for test_checkpoint.
# This may be replaced when dependencies are built.
