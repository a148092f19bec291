file(REMOVE_RECURSE
  "../bin/test_alloc_faults"
  "../bin/test_alloc_faults.pdb"
  "CMakeFiles/test_alloc_faults.dir/test_alloc_faults.c.o"
  "CMakeFiles/test_alloc_faults.dir/test_alloc_faults.c.o.d"
  "CMakeFiles/test_alloc_faults.dir/test_util.c.o"
  "CMakeFiles/test_alloc_faults.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_alloc_faults.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
