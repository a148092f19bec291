# Empty dependencies file for test_dataset_checks.
# This may be replaced when dependencies are built.
