file(REMOVE_RECURSE
  "../bin/test_registry"
  "../bin/test_registry.pdb"
  "CMakeFiles/test_registry.dir/test_registry.c.o"
  "CMakeFiles/test_registry.dir/test_registry.c.o.d"
  "CMakeFiles/test_registry.dir/test_util.c.o"
  "CMakeFiles/test_registry.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_registry.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
