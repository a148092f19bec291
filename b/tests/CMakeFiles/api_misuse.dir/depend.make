# Empty dependencies file for api_misuse.
# This may be replaced when dependencies are built.
