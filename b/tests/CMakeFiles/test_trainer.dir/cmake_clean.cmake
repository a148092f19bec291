file(REMOVE_RECURSE
  "../bin/test_trainer"
  "../bin/test_trainer.pdb"
  "CMakeFiles/test_trainer.dir/mem_source.c.o"
  "CMakeFiles/test_trainer.dir/mem_source.c.o.d"
  "CMakeFiles/test_trainer.dir/test_trainer.c.o"
  "CMakeFiles/test_trainer.dir/test_trainer.c.o.d"
  "CMakeFiles/test_trainer.dir/test_util.c.o"
  "CMakeFiles/test_trainer.dir/test_util.c.o.d"
  "CMakeFiles/test_trainer.dir/trainer_fixture.c.o"
  "CMakeFiles/test_trainer.dir/trainer_fixture.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_trainer.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
