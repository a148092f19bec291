file(REMOVE_RECURSE
  "../bin/test_trainer_api"
  "../bin/test_trainer_api.pdb"
  "CMakeFiles/test_trainer_api.dir/cpu_dir_fixture.c.o"
  "CMakeFiles/test_trainer_api.dir/cpu_dir_fixture.c.o.d"
  "CMakeFiles/test_trainer_api.dir/test_trainer_api.c.o"
  "CMakeFiles/test_trainer_api.dir/test_trainer_api.c.o.d"
  "CMakeFiles/test_trainer_api.dir/test_util.c.o"
  "CMakeFiles/test_trainer_api.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_trainer_api.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
