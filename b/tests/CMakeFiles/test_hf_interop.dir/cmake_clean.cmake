file(REMOVE_RECURSE
  "../bin/test_hf_interop"
  "../bin/test_hf_interop.pdb"
  "CMakeFiles/test_hf_interop.dir/cpu_dir_fixture.c.o"
  "CMakeFiles/test_hf_interop.dir/cpu_dir_fixture.c.o.d"
  "CMakeFiles/test_hf_interop.dir/test_hf_interop.c.o"
  "CMakeFiles/test_hf_interop.dir/test_hf_interop.c.o.d"
  "CMakeFiles/test_hf_interop.dir/test_util.c.o"
  "CMakeFiles/test_hf_interop.dir/test_util.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/test_hf_interop.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
