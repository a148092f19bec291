# Empty dependencies file for test_checkpoint_checks.
# This may be replaced when dependencies are built.
