file(REMOVE_RECURSE
  "../bin/test_tcp_comm"
  "../bin/test_tcp_comm.pdb"
  "CMakeFiles/test_tcp_comm.dir/test_tcp_comm.c.o"
  "CMakeFiles/test_tcp_comm.dir/test_tcp_comm.c.o.d"
  "CMakeFiles/test_tcp_comm.dir/test_util.c.o"
  "CMakeFiles/test_tcp_comm.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_tcp_comm.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
