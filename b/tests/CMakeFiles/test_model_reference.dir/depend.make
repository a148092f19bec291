# Empty dependencies file for test_model_reference.
# This may be replaced when dependencies are built.
