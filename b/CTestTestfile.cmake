# CMake generated Testfile for 
# Source directory: /work/wip19
# Build directory: /work/wip19/b
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
subdirs("libesmtrain")
subdirs("backends")
subdirs("cli")
subdirs("examples")
subdirs("tests")
