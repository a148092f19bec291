# Empty compiler generated dependencies file for esmtrain_internal.
# This may be replaced when dependencies are built.
