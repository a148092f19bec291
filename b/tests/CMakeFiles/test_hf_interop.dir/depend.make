# Empty dependencies file for test_hf_interop.
# This may be replaced when dependencies are built.
