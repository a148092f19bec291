# Empty dependencies file for test_trainer_api.
# This may be replaced when dependencies are built.
