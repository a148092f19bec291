# Empty dependencies file for test_dist_env.
# This may be replaced when dependencies are built.
