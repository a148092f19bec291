# Empty dependencies file for test_tcp_comm.
# This may be replaced when dependencies are built.
