file(REMOVE_RECURSE
  "../bin/test_schedule"
  "../bin/test_schedule.pdb"
  "CMakeFiles/test_schedule.dir/test_schedule.c.o"
  "CMakeFiles/test_schedule.dir/test_schedule.c.o.d"
  "CMakeFiles/test_schedule.dir/test_util.c.o"
  "CMakeFiles/test_schedule.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_schedule.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
