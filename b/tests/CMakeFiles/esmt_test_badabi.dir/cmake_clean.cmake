file(REMOVE_RECURSE
  "CMakeFiles/esmt_test_badabi.dir/plugins/bad_abi.c.o"
  "CMakeFiles/esmt_test_badabi.dir/plugins/bad_abi.c.o.d"
  "plugins/bad_abi.pdb"
  "plugins/bad_abi.so"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmt_test_badabi.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
