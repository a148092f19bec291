# Empty dependencies file for test_planner.
# This may be replaced when dependencies are built.
