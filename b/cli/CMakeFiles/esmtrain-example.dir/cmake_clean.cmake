file(REMOVE_RECURSE
  "../bin/esmtrain-example"
  "../bin/esmtrain-example.pdb"
  "CMakeFiles/esmtrain-example.dir/cli_config.c.o"
  "CMakeFiles/esmtrain-example.dir/cli_config.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cli_numbers.c.o"
  "CMakeFiles/esmtrain-example.dir/cli_numbers.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cli_signals.c.o"
  "CMakeFiles/esmtrain-example.dir/cli_signals.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_bench.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_bench.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_bench_adamw.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_bench_adamw.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_bench_loader.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_bench_loader.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_ingest.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_ingest.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_interop.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_interop.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_launch.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_launch.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_plan.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_plan.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_probe.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_probe.c.o.d"
  "CMakeFiles/esmtrain-example.dir/cmd_train.c.o"
  "CMakeFiles/esmtrain-example.dir/cmd_train.c.o.d"
  "CMakeFiles/esmtrain-example.dir/main.c.o"
  "CMakeFiles/esmtrain-example.dir/main.c.o.d"
  "CMakeFiles/esmtrain-example.dir/run_dir.c.o"
  "CMakeFiles/esmtrain-example.dir/run_dir.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/esmtrain-example.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
