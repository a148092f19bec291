file(REMOVE_RECURSE
  "../bin/minimal_train"
  "../bin/minimal_train.pdb"
  "CMakeFiles/minimal_train.dir/minimal_train.c.o"
  "CMakeFiles/minimal_train.dir/minimal_train.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/minimal_train.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
