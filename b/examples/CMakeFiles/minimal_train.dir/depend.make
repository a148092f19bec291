# Empty dependencies file for minimal_train.
# This may be replaced when dependencies are built.
