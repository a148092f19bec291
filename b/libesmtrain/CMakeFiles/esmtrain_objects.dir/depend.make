# Empty dependencies file for esmtrain_objects.
# This may be replaced when dependencies are built.
