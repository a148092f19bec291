# Empty dependencies file for test_input_checks.
# This may be replaced when dependencies are built.
