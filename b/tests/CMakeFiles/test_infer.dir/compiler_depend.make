# Empty compiler generated dependencies file for test_infer.
# This may be replaced when dependencies are built.
