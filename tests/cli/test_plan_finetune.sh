#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `plan` for fine-tuning: LoRA on esm2_t33_650M plans the moments and
# gradients of the adapters and the head only and fits 8 GiB in fp16; full
# fine-tuning of the same model holds whole-model moments; esm2_t36_3B does
# not fit yet and the advice names why (its fp32 master weights, which stay
# on the device); bad flags are refused with exit 2. Usage: test_plan_finetune.sh ESMTRAIN_EXAMPLE
set -u
CLI=$1
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

out=$("$CLI" plan --model esm2_t33_650M --lora-rank 8 --device-mem 8GiB --precision fp16)
rc=$?
echo "$out"
check "LoRA 650M fits 8 GiB (exit 0)" '[ $rc -eq 0 ]'
check "LoRA 650M: the moments are the adapters' and the head's (MiB)" \
  'echo "$out" | grep -Eq "AdamW moments +[0-9.]+ MiB"'
check "LoRA 650M: the plan names the fine-tuning" \
  'echo "$out" | grep -q "head seq-class (2 labels), frozen layers 0, LoRA rank 8 (targets 0x5)"'
full=$("$CLI" plan --model esm2_t33_650M --device-mem 8GiB --precision fp16 --head seq-class \
  --offload off --recompute on --micro-batch 1)
check "full fine-tuning 650M: whole-model moments (GiB)" \
  'echo "$full" | grep -Eq "AdamW moments +[0-9.]+ GiB"'
enc=$("$CLI" plan --model esm2_t33_650M --frozen-layers encoder --num-labels 5 --precision fp16)
check "encoder frozen: the head's moments only (KiB or MiB)" \
  'echo "$enc" | grep -Eq "AdamW moments +[0-9.]+ (KiB|MiB)"'
big=$("$CLI" plan --model esm2_t36_3B --lora-rank 8 --device-mem 8GiB --precision fp16)
rc=$?
check "LoRA 3B on 8 GiB: not yet (exit 3), the frozen weights' fp32 master named" \
  '[ $rc -eq 3 ] && echo "$big" | grep -q "GiB of it the fp32 master weights: a model with frozen"'
bad=$("$CLI" plan --lora-rank 8 --lora-targets query,nope 2>&1)
rc=$?
check "an unknown LoRA target is refused (exit 2)" '[ $rc -eq 2 ] && echo "$bad" | grep -q "lora-targets"'
bad=$("$CLI" plan --head classify 2>&1)
rc=$?
check "an unknown head is refused (exit 2)" '[ $rc -eq 2 ] && echo "$bad" | grep -q -- "--head"'
exit $fail
