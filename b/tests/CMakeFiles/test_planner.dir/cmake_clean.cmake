file(REMOVE_RECURSE
  "../bin/test_planner"
  "../bin/test_planner.pdb"
  "CMakeFiles/test_planner.dir/test_planner.c.o"
  "CMakeFiles/test_planner.dir/test_planner.c.o.d"
  "CMakeFiles/test_planner.dir/test_util.c.o"
  "CMakeFiles/test_planner.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_planner.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
