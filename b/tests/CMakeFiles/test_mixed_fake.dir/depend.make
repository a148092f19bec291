# Empty dependencies file for test_mixed_fake.
# This may be replaced when dependencies are built.
