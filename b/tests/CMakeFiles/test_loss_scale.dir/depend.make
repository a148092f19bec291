# Empty dependencies file for test_loss_scale.
# This may be replaced when dependencies are built.
