file(REMOVE_RECURSE
  "../bin/test_io_faults"
  "../bin/test_io_faults.pdb"
  "CMakeFiles/test_io_faults.dir/mem_source.c.o"
  "CMakeFiles/test_io_faults.dir/mem_source.c.o.d"
  "CMakeFiles/test_io_faults.dir/test_io_faults.c.o"
  "CMakeFiles/test_io_faults.dir/test_io_faults.c.o.d"
  "CMakeFiles/test_io_faults.dir/test_util.c.o"
  "CMakeFiles/test_io_faults.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_io_faults.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
