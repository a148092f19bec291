file(REMOVE_RECURSE
  "libesmtrain_internal.a"
  "libesmtrain_internal.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmtrain_internal.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
