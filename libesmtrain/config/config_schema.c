/* SPDX-License-Identifier: MIT */
/* Every configuration key, its type, default, bounds and meaning: the one
 * table that defaults, parsing, messages, --print-config and the key
 * introspection API all read. Bounds are inclusive; BIG means "no upper
 * bound" (messages then say ">= min"). */
#include "config_schema.h"

#define I ESMT_CONFIG_INT
#define D ESMT_CONFIG_DOUBLE
#define B ESMT_CONFIG_BOOL
#define S ESMT_CONFIG_STRING
#define E ESMT_CONFIG_ENUM
#define Y ESMT_CONFIG_BYTES
#define BIG ESMT_CONFIG_UNBOUNDED

const esmt_key_def esmt_config_keys[] = {
    {"model.preset", E, "esm2_t6_8M", ESMT_MODEL_PRESETS, 0, 0,
     "ESM-2 size; setting it fills the model.* sizes below"},
    {"model.num_layers", I, "6", NULL, 1, 1024, "transformer layers (L)"},
    {"model.hidden_size", I, "320", NULL, 2, 65536, "model width (d)"},
    {"model.num_heads", I, "20", NULL, 1, 1024, "attention heads; d/heads must be even"},
    {"model.ffn_size", I, "1280", NULL, 0, 1 << 20, "feed-forward width; 0 = 4 x hidden_size"},
    {"model.max_positions", I, "1024", NULL, 3, 65536, "longest row the model accepts, cls/eos included"},
    {"data.train_dir", S, "", NULL, 0, 0, "dataset from `esmtrain-example ingest`"},
    {"data.max_len", I, "1024", NULL, 3, 65536, "tokens per row incl. cls/eos; longer proteins are cropped"},
    {"data.tokens_per_batch", I, "4096", NULL, 3, BIG, "padded tokens per micro-batch (rows x longest)"},
    {"data.micro_batch", I, "0", NULL, 0, 1 << 20, "rows per micro-batch; 0 = as many as the token budget allows"},
    {"data.prefetch", I, "2", NULL, 0, 1024, "batches prepared ahead by a background thread"},
    {"data.seed", I, "1", NULL, 0, BIG, "order, crops and masks"},
    {"data.mask_prob", D, "0.15", NULL, 0, 1, "share of residues selected for the loss"},
    {"data.pack", E, "auto", "auto|on|off", 0, 0,
     "pack several proteins into each row (attention stays within a protein); auto = on for "
     "GPU backends that support it"},
    {"data.sampling", E, "auto", "auto|sequence|cluster", 0, 0,
     "what an epoch visits: every protein, or every cluster once with one member drawn "
     "uniformly (ESM-2's UniRef50/90 recipe; needs ingest --clusters); auto = cluster when the "
     "dataset has clusters"},
    {"train.max_steps", I, "100000", NULL, 0, BIG,
     "optimizer updates; 0 = until train.max_time or Ctrl-C (schedule.kind constant only)"},
    {"train.tokens_per_update", I, "0", NULL, 0, BIG, "accumulate micro-batches to this many tokens; 0 = one"},
    {"train.seed", I, "1", NULL, 0, BIG, "weight initialisation"},
    {"train.log_every", I, "10", NULL, 0, BIG, "updates between log lines"},
    {"train.eval_every", I, "200", NULL, 0, BIG, "updates between evaluations; 0 = never"},
    {"train.eval_batches", I, "0", NULL, 0, BIG, "batches per evaluation; 0 = the whole validation split"},
    {"train.save_every", I, "0", NULL, 0, BIG, "updates between checkpoints; 0 = at the end (and best)"},
    {"train.keep_last", I, "3", NULL, 0, 100000, "checkpoints kept besides the best; 0 = all"},
    {"train.out_dir", S, "runs/esmtrain", NULL, 0, 0, "run directory: checkpoints, train.log, metrics.jsonl"},
    {"train.fast_dev_run", I, "0", NULL, 0, BIG, "N updates, no checkpoints or evaluation; 0 = off"},
    {"train.overfit_batches", I, "0", NULL, 0, BIG, "train on the first N batches only; 0 = off"},
    {"train.nonfinite", E, "skip", "skip|abort", 0, 0, "on a NaN/Inf loss or gradient: skip the update or stop"},
    {"train.grad_clip", D, "1.0", NULL, 0, BIG, "global gradient-norm clip; 0 = off"},
    {"train.max_time", D, "0", NULL, 0, BIG, "stop (and save) after this many seconds; 0 = no limit"},
    {"optimizer.kind", E, "adamw", "adamw|lion", 0, 0,
     "adamw (2 moments of state) or lion (1; set a 3-10x lower lr, beta2 0.99, a 3-10x higher weight_decay)"},
    {"optimizer.lr", D, "4e-4", NULL, 0, 10, "peak learning rate (the schedule's peak)"},
    {"optimizer.beta1", D, "0.9", NULL, 0, 0.999999, "AdamW/Lion beta1"},
    {"optimizer.beta2", D, "0.98", NULL, 0, 0.999999, "AdamW/Lion beta2 (Lion: 0.99 advised)"},
    {"optimizer.eps", D, "1e-8", NULL, 1e-30, 1, "AdamW epsilon (unused by Lion)"},
    {"optimizer.weight_decay", D, "0.01", NULL, 0, 10, "decoupled weight decay"},
    {"optimizer.decay_biases_and_norms", B, "true", NULL, 0, 0, "decay every tensor (ESM-2) or skip biases/LayerNorm"},
    {"schedule.kind", E, "esm2", "esm2|cosine|constant", 0, 0, "learning-rate shape after warmup"},
    {"schedule.warmup_steps", I, "2000", NULL, 0, BIG, "linear warmup length"},
    {"schedule.final_lr_fraction", D, "0.1", NULL, 0, 1, "end learning rate as a share of the peak"},
    {"schedule.decay_end_fraction", D, "0.9", NULL, 0.000001, 1, "esm2: share of training when decay ends"},
    {"backend.name", S, "", NULL, 0, 0, "force a backend (cpu, turing_fp16, ampere_bf16, nccl_dp); empty = probe"},
    {"backend.threads", I, "0", NULL, 0, 1024, "host threads; 0 = all cores"},
    {"backend.precision", E, "auto", "auto|fp32|fp16|bf16", 0, 0, "compute precision; auto = the backend's"},
    {"backend.deterministic", B, "true", NULL, 0, 0, "bitwise repeatable gradients; false lets GPU backends sum attention's dQ with atomics (faster, last bits vary run to run)"},
    {"backend.device_memory_limit", Y, "0", NULL, 0, BIG, "device memory the backend may allocate (e.g. 8GiB), also the planner's budget; 0 = none"},
    {"dist.bucket_size", Y, "26214400", NULL, 4096, BIG,
     "data parallel: gradient bytes per all-reduce (25 MiB; buckets overlap backward)"},
    {"dist.force", B, "false", NULL, 0, 0,
     "data parallel even as one process (as ESMTRAIN_FORCE_DP=1): world size 1 through nccl_dp"},
    {"dist.comm", E, "auto", "auto|tcp|mpi", 0, 0,
     "host collectives (cpu backend): auto = MPI when mpirun/srun --mpi started the ranks and "
     "the MPI plugin is installed, else the TCP ring; ESMTRAIN_COMM overrides"},
    {"dist.zero", I, "0", NULL, 0, 3,
     "ZeRO stage: 1 shards the AdamW moments over the ranks (reduce-scatter, all-gather); 2 "
     "also keeps only the shard's gradients between micro-batches (one reduce-scatter each) "
     "and, in fp16/bf16, the fp32 master; 3 also the compute weights, each layer's gathered "
     "before it runs"},
    {"offload.optimizer", E, "auto", "auto|on|off", 0, 0, "master weights and AdamW on the host"},
    {"offload.recompute", E, "auto", "auto|on|off", 0, 0, "keep only layer inputs, recompute the rest in backward; auto: if the planner needs it"},
    {"offload.stream", E, "auto", "auto|off|gradients|weights", 0, 0,
     "stream from host memory layer by layer (needs offload.optimizer): gradients go down as "
     "backward produces them; weights also come up as each layer runs; auto: if the planner "
     "needs it"},
    {"offload.pinned_memory_limit", Y, "0", NULL, 0, BIG, "cap on page-locked host memory; 0 = none"},
    {"offload.host_memory_limit", Y, "0", NULL, 0, BIG, "host memory the offloaded state may take; 0 = what the machine has available (MemAvailable, ulimit, cgroup)"},
    {"loss_scale.enabled", E, "auto", "auto|on|off", 0, 0,
     "dynamic loss scaling; auto = on when the compute precision is fp16"},
    {"loss_scale.initial", D, "65536", NULL, 1, 1e30, "fp16 dynamic loss scale start"},
    {"loss_scale.growth_interval", I, "2000", NULL, 1, BIG, "clean steps before the scale doubles"},
    {"loss_scale.backoff", D, "0.5", NULL, 0.01, 0.99, "factor on overflow"},
    {"loss_scale.hysteresis", I, "2", NULL, 1, 1000, "overflows tolerated before backing off"},
    {"loss_scale.min", D, "1", NULL, 1e-10, 1e30, "floor: at it, save and stop with diagnostics"},
    {"finetune.data", S, "", NULL, 0, 0,
     "labelled CSV/TSV (docs/finetune.md) for `finetune`; empty = pre-training on data.train_dir"},
    {"finetune.task", E, "seq-class", "seq-class|multilabel|regression|residue-class", 0, 0,
     "the task head and its loss"},
    {"finetune.seq_col", S, "sequence", NULL, 0, 0, "the table's sequence column"},
    {"finetune.id_col", S, "", NULL, 0, 0, "the proteins' id column (for finetune.clusters); empty = \"id\" if present"},
    {"finetune.label_cols", S, "label", NULL, 0, 0,
     "label column(s), comma-separated: several are 0/1 labels (multilabel) or targets (regression)"},
    {"finetune.label_sep", S, "", NULL, 0, 0,
     "separator of a multilabel list or a per-residue list; empty = one character per residue"},
    {"finetune.split_col", S, "", NULL, 0, 0, "a column of train/valid/test; empty = drawn"},
    {"finetune.clusters", S, "", NULL, 0, 0,
     "cluster TSV (as ingest --clusters): validation and test hold out whole clusters"},
    {"finetune.valid_fraction", D, "0.1", NULL, 0, 0.99, "share drawn for validation"},
    {"finetune.test_fraction", D, "0", NULL, 0, 0.99, "share drawn for test"},
    {"finetune.batch_rows", I, "16", NULL, 1, 1 << 20, "proteins per micro-batch"},
    {"finetune.class_weights", S, "", NULL, 0, 0,
     "seq-class cross-entropy weights: auto (inverse class frequency in training, sklearn's "
     "balanced) or w1,w2,... in class order; empty = none"},
    {"finetune.pooling", E, "cls", "mean|cls", 0, 0, "a sequence head's pooling: cls (transformers', exports) or the mean of the residues"},
    {"finetune.freeze", S, "none", NULL, 0, 0,
     "what does not train: none, encoder (the head only) or N (the embedding and first N layers)"},
    {"finetune.lora_rank", I, "0", NULL, 0, 4096, "LoRA rank on the encoder's linear maps; 0 = none"},
    {"finetune.lora_alpha", D, "16", NULL, 0, 1e6, "LoRA alpha (the update is scaled by alpha / rank)"},
    {"finetune.lora_dropout", D, "0", NULL, 0, 0.99,
     "dropout on each LoRA adapter's input in training (peft's lora_dropout)"},
    {"finetune.lora_targets", S, "q,k,v,o", NULL, 0, 0,
     "LoRA target modules among q,k,v,o,up,down"},
    {"finetune.head_lr_scale", D, "1", NULL, 0, 1e6, "the head's learning rate relative to optimizer.lr"},
    {"finetune.freeze_encoder_steps", I, "0", NULL, 0, BIG,
     "updates that train the head alone before the encoder (or its LoRA adapters) joins; 0 = none"},
    {"finetune.best_metric", S, "loss", NULL, 0, 0,
     "evaluation figure that picks the best checkpoint: loss, accuracy, macro_f1, auroc, auprc, "
     "pearson, spearman, rmse"},
    {"finetune.patience", I, "0", NULL, 0, BIG,
     "stop after this many evaluations without a better best_metric; 0 = never early"},
};

#define NKEYS (sizeof esmt_config_keys / sizeof esmt_config_keys[0])
_Static_assert(NKEYS <= ESMT_CONFIG_MAX_KEYS, "raise ESMT_CONFIG_MAX_KEYS");
const int esmt_config_nkeys = (int)NKEYS;
