file(REMOVE_RECURSE
  "../bin/test_loss_scale"
  "../bin/test_loss_scale.pdb"
  "CMakeFiles/test_loss_scale.dir/mem_source.c.o"
  "CMakeFiles/test_loss_scale.dir/mem_source.c.o.d"
  "CMakeFiles/test_loss_scale.dir/test_loss_scale.c.o"
  "CMakeFiles/test_loss_scale.dir/test_loss_scale.c.o.d"
  "CMakeFiles/test_loss_scale.dir/test_util.c.o"
  "CMakeFiles/test_loss_scale.dir/test_util.c.o.d"
  "CMakeFiles/test_loss_scale.dir/trainer_fixture.c.o"
  "CMakeFiles/test_loss_scale.dir/trainer_fixture.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_loss_scale.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
