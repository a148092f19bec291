# Empty dependencies file for interop_tool.
# This may be replaced when dependencies are built.
