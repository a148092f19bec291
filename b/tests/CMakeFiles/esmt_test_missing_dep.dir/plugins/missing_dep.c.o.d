tests/CMakeFiles/esmt_test_missing_dep.dir/plugins/missing_dep.c.o: \
 /work/wip19/tests/plugins/missing_dep.c /usr/include/stdc-predef.h
