tests/CMakeFiles/esmt_test_missing_dep_lib.dir/plugins/missing_dep_lib.c.o: \
 /work/wip19/tests/plugins/missing_dep_lib.c /usr/include/stdc-predef.h
