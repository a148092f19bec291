file(REMOVE_RECURSE
  "../bin/interop_tool"
  "../bin/interop_tool.pdb"
  "CMakeFiles/interop_tool.dir/interop/interop_tool.c.o"
  "CMakeFiles/interop_tool.dir/interop/interop_tool.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/interop_tool.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
