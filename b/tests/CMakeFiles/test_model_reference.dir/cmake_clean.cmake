file(REMOVE_RECURSE
  "../bin/test_model_reference"
  "../bin/test_model_reference.pdb"
  "CMakeFiles/test_model_reference.dir/reference_fixture.c.o"
  "CMakeFiles/test_model_reference.dir/reference_fixture.c.o.d"
  "CMakeFiles/test_model_reference.dir/test_model_reference.c.o"
  "CMakeFiles/test_model_reference.dir/test_model_reference.c.o.d"
  "CMakeFiles/test_model_reference.dir/test_util.c.o"
  "CMakeFiles/test_model_reference.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_model_reference.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
