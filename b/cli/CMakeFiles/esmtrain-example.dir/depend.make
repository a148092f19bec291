# Empty dependencies file for esmtrain-example.
# This may be replaced when dependencies are built.
