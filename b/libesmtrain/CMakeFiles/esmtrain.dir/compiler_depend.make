# Empty compiler generated dependencies file for esmtrain.
# This may be replaced when dependencies are built.
