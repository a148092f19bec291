
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wip19/libesmtrain/backend/backend_host.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/backend_host.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/backend_host.c.o.d"
  "/work/wip19/libesmtrain/backend/context.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/context.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/context.c.o.d"
  "/work/wip19/libesmtrain/backend/gemm_ceiling.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/gemm_ceiling.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/gemm_ceiling.c.o.d"
  "/work/wip19/libesmtrain/backend/registry.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/registry.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/backend/registry.c.o.d"
  "/work/wip19/libesmtrain/base/clock.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/clock.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/clock.c.o.d"
  "/work/wip19/libesmtrain/base/cpu_info.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/cpu_info.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/cpu_info.c.o.d"
  "/work/wip19/libesmtrain/base/error.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/error.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/error.c.o.d"
  "/work/wip19/libesmtrain/base/fs_util.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/fs_util.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/fs_util.c.o.d"
  "/work/wip19/libesmtrain/base/host_memory.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/host_memory.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/host_memory.c.o.d"
  "/work/wip19/libesmtrain/base/input_file.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/input_file.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/input_file.c.o.d"
  "/work/wip19/libesmtrain/base/json_input.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/json_input.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/json_input.c.o.d"
  "/work/wip19/libesmtrain/base/log.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/log.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/log.c.o.d"
  "/work/wip19/libesmtrain/base/out_dir.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/out_dir.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/out_dir.c.o.d"
  "/work/wip19/libesmtrain/base/version.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/version.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/base/version.c.o.d"
  "/work/wip19/libesmtrain/config/config.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config.c.o.d"
  "/work/wip19/libesmtrain/config/config_emit.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_emit.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_emit.c.o.d"
  "/work/wip19/libesmtrain/config/config_plan.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_plan.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_plan.c.o.d"
  "/work/wip19/libesmtrain/config/config_presets.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_presets.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_presets.c.o.d"
  "/work/wip19/libesmtrain/config/config_read.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_read.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_read.c.o.d"
  "/work/wip19/libesmtrain/config/config_schema.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_schema.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_schema.c.o.d"
  "/work/wip19/libesmtrain/config/config_validate.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_validate.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_validate.c.o.d"
  "/work/wip19/libesmtrain/config/config_value.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_value.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_value.c.o.d"
  "/work/wip19/libesmtrain/config/config_yaml.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_yaml.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/config/config_yaml.c.o.d"
  "/work/wip19/libesmtrain/data/alphabet.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/alphabet.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/alphabet.c.o.d"
  "/work/wip19/libesmtrain/data/dataset_manifest.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/dataset_manifest.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/dataset_manifest.c.o.d"
  "/work/wip19/libesmtrain/data/fasta_magic.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/fasta_magic.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/fasta_magic.c.o.d"
  "/work/wip19/libesmtrain/data/fasta_stream.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/fasta_stream.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/fasta_stream.c.o.d"
  "/work/wip19/libesmtrain/data/ingest_run.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/ingest_run.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/ingest_run.c.o.d"
  "/work/wip19/libesmtrain/data/mlm_loader.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/mlm_loader.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/mlm_loader.c.o.d"
  "/work/wip19/libesmtrain/data/shard_set.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/shard_set.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/shard_set.c.o.d"
  "/work/wip19/libesmtrain/data/shard_verify.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/shard_verify.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/data/shard_verify.c.o.d"
  "/work/wip19/libesmtrain/dist/dist_env.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dist_env.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dist_env.c.o.d"
  "/work/wip19/libesmtrain/dist/dp_device.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_device.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_device.c.o.d"
  "/work/wip19/libesmtrain/dist/dp_group.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_group.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_group.c.o.d"
  "/work/wip19/libesmtrain/dist/dp_zero.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_zero.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/dp_zero.c.o.d"
  "/work/wip19/libesmtrain/dist/tcp_comm.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm.c.o.d"
  "/work/wip19/libesmtrain/dist/tcp_comm_coll.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_coll.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_coll.c.o.d"
  "/work/wip19/libesmtrain/dist/tcp_comm_io.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_io.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_io.c.o.d"
  "/work/wip19/libesmtrain/dist/tcp_comm_net.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_net.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/dist/tcp_comm_net.c.o.d"
  "/work/wip19/libesmtrain/io/carried_tensors.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/carried_tensors.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/carried_tensors.c.o.d"
  "/work/wip19/libesmtrain/io/checkpoint.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint.c.o.d"
  "/work/wip19/libesmtrain/io/checkpoint_resolve.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_resolve.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_resolve.c.o.d"
  "/work/wip19/libesmtrain/io/checkpoint_state.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_state.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_state.c.o.d"
  "/work/wip19/libesmtrain/io/checkpoint_weights.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_weights.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/checkpoint_weights.c.o.d"
  "/work/wip19/libesmtrain/io/hf_export.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/hf_export.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/hf_export.c.o.d"
  "/work/wip19/libesmtrain/io/hf_import.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/hf_import.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/hf_import.c.o.d"
  "/work/wip19/libesmtrain/io/model_save.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/model_save.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/model_save.c.o.d"
  "/work/wip19/libesmtrain/io/safetensors.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/safetensors.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/safetensors.c.o.d"
  "/work/wip19/libesmtrain/io/safetensors_writer.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/safetensors_writer.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/io/safetensors_writer.c.o.d"
  "/work/wip19/libesmtrain/memory/offload.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/offload.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/offload.c.o.d"
  "/work/wip19/libesmtrain/memory/param_memory.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/param_memory.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/param_memory.c.o.d"
  "/work/wip19/libesmtrain/memory/planner.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/planner.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/memory/planner.c.o.d"
  "/work/wip19/libesmtrain/model/model_activations.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_activations.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_activations.c.o.d"
  "/work/wip19/libesmtrain/model/model_api.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_api.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_api.c.o.d"
  "/work/wip19/libesmtrain/model/model_backward.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_backward.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_backward.c.o.d"
  "/work/wip19/libesmtrain/model/model_config.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_config.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_config.c.o.d"
  "/work/wip19/libesmtrain/model/model_forward.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_forward.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_forward.c.o.d"
  "/work/wip19/libesmtrain/model/model_infer.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_infer.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_infer.c.o.d"
  "/work/wip19/libesmtrain/model/model_init.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_init.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_init.c.o.d"
  "/work/wip19/libesmtrain/model/model_layout.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_layout.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_layout.c.o.d"
  "/work/wip19/libesmtrain/model/model_packing.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_packing.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_packing.c.o.d"
  "/work/wip19/libesmtrain/model/model_precision.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_precision.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_precision.c.o.d"
  "/work/wip19/libesmtrain/model/model_profile.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_profile.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/model/model_profile.c.o.d"
  "/work/wip19/libesmtrain/optim/model_shard.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/model_shard.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/model_shard.c.o.d"
  "/work/wip19/libesmtrain/optim/optimizer.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/optimizer.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/optimizer.c.o.d"
  "/work/wip19/libesmtrain/optim/schedule.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/schedule.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/optim/schedule.c.o.d"
  "/work/wip19/libesmtrain/train/loss_scaler.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/loss_scaler.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/loss_scaler.c.o.d"
  "/work/wip19/libesmtrain/train/resume_check.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/resume_check.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/resume_check.c.o.d"
  "/work/wip19/libesmtrain/train/trainer.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer.c.o.d"
  "/work/wip19/libesmtrain/train/trainer_config.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_config.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_config.c.o.d"
  "/work/wip19/libesmtrain/train/trainer_eval.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_eval.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_eval.c.o.d"
  "/work/wip19/libesmtrain/train/trainer_state.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_state.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_state.c.o.d"
  "/work/wip19/libesmtrain/train/trainer_update.c" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_update.c.o" "gcc" "libesmtrain/CMakeFiles/esmtrain_objects.dir/train/trainer_update.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
