# Empty dependencies file for test_dp_device.
# This may be replaced when dependencies are built.
