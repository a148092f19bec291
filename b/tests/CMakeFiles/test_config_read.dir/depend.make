# Empty dependencies file for test_config_read.
# This may be replaced when dependencies are built.
