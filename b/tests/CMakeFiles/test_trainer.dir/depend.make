# Empty dependencies file for test_trainer.
# This may be replaced when dependencies are built.
