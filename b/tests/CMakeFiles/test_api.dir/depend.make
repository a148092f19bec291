# Empty dependencies file for test_api.
# This may be replaced when dependencies are built.
