file(REMOVE_RECURSE
  "../lib/libesmtrain.pdb"
  "../lib/libesmtrain.so"
  "../lib/libesmtrain.so.0.2"
  "../lib/libesmtrain.so.0.2.0"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmtrain.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
