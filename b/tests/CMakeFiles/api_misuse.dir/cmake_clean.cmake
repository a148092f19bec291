file(REMOVE_RECURSE
  "../bin/api_misuse"
  "../bin/api_misuse.pdb"
  "CMakeFiles/api_misuse.dir/bad_inputs/api_misuse.c.o"
  "CMakeFiles/api_misuse.dir/bad_inputs/api_misuse.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/api_misuse.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
