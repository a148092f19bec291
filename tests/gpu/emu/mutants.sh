#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The checkers against mutated GPU code (host CUDA emulator): each mutant
# deletes one synchronisation from the real sources at run time
# (ESMT_EMU_DROP_BARRIER=file:line, ESMT_EMU_DROP_EVENT_WAIT=1, see
# backends/cuda_emu/README.md) and must be reported by the emulator and fail
# its test. The barriers are the three the old lockstep emulator could not
# see: the barrier that retires a streamed buffer before the next cp.async
# into it (retire_tile, shared by the three kernels; the forward reports
# first), the forward's barrier after its warps read Q from the buffer
# tile 1 then fills, the dK/dV kernel's loop-top barrier, and the one before the dK/dV
# kernel's fp32 staging tile; and the non-deterministic backward's barrier
# between writing dS to shared memory and the dQ GEMM that reads it. The cp.async mutant makes
# every cp.async.wait_group a no-op (ESMT_EMU_DROP_CP_WAIT=1). On sm_90 the
# wgmma forward's loop-top barrier and its fence.proxy.async
# (ESMT_EMU_DROP_PROXY_FENCE=1). The event wait is the
# offload schedule's (the copy stream waits for backward before it reads
# the gradients). The stream layer's two (memory/stream.c, switched off by
# test_gpu_offload --mutant): the compute stream's wait for a layer's
# weight upload, and the host's wait for a gradient slot's copy before the
# slot is zeroed for the next layer. The checkers added since: every
# warp shuffle's mask narrowed to half the warp (ESMT_EMU_SHFL_MASK,
# reported by the warp-collective mask check), and the host's stream and
# event synchronisations removed (ESMT_EMU_DROP_HOST_SYNC=1: the host reads
# pinned gradient buffers that copies are still writing, reported by the
# pinned-page guard). ZeRO-2's two compute-stream waits (memory/grad_shard.c,
# switched off by test_gpu_nccl_dp --mutant). And four mutations of the sources themselves, each
# built from a mutated copy of backends/cuda_common (source_mutant.sh: one
# translation unit recompiled, ampere_bf16 relinked, a few seconds): the
# cross-entropy sum's static __shared__ slots written only by threads with
# rows (initcheck), its reduction tail run warp-synchronously without
# barriers (the intra-warp race check), and two numeric ones that only a
# comparison against cpu.so sees (gpu_matches_cpu.sh, ~20 s each): AdamW's
# second moment with (1 - b1) for (1 - b2), and GELU's 1/sqrt(2) 14% too
# large. Usage: mutants.sh BUILD_DIR
set -uo pipefail
build=$1
src=$(cd "$(dirname "$0")/../../.." && pwd)
mma=$src/backends/cuda_common/cuda_attention_mma.cuh
export ESMT_TEST_BACKEND_DIR=$build/lib/esmtrain/backends ESMT_EMU_SM=80
pass=0
fail=0

# Line of the first `__syncthreads();` at or after the first line matching
# PATTERN (after line FROM).
barrier_after() {
  awk -v pat="$1" -v from="${2:-0}" 'NR > from && !seen && $0 ~ pat { seen = 1 }
    seen && /__syncthreads\(\);/ { print NR; exit }' "$mma"
}
fwd=$(barrier_after 'End of a loop iteration on sm_80+')
fwd_fn=$(grep -n 'attn_fwd_mma(attn_params p)' "$mma" | cut -d: -f1)
qstage=$(barrier_after 'every warp has read Q' "$fwd_fn")
dkdv_fn=$(grep -n 'void bwd_dkdv(const attn_params' "$mma" | cut -d: -f1)
dkdv=$(barrier_after '// query tile i0 is visible to all' "$dkdv_fn")
staging=$(barrier_after 'Out through the fp32 staging tile' "$dkdv_fn")
dsbar=$(barrier_after "every warp's dS rows are in sdS" "$dkdv_fn")
for v in fwd fwd_fn qstage dkdv_fn dkdv staging dsbar; do
  [ -n "${!v}" ] || { echo "FAIL: mutants.sh: no line for $v in $mma (comments moved?)"; exit 1; }
done

mutant() {  # NAME EXPECTED_REPORT ENV... -- COMMAND...
  local name=$1 want=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log t0=$SECONDS
  log=$(env "${envs[@]}" timeout 900 "$@" 2>&1)
  local rc=$?
  if [ "$rc" -ne 0 ] && grep -q "$want" <<<"$log"; then
    echo "ok: $name ($((SECONDS - t0)) s): reported ($(grep -m1 "$want" <<<"$log" | cut -c1-160))"
    pass=$((pass + 1))
  else
    echo "FAIL: $name: exit $rc, expected a report matching '$want'"
    tail -15 <<<"$log"
    fail=$((fail + 1))
  fi
}

for hd in 32 64 128; do
  mutant "buffer-retiring barrier (retire_tile, all three kernels) removed (line $fwd), f16 hd $hd" \
    "cuda-emu: race: kernel attn_\(fwd\|bwd_dkdv\|bwd_dq\)_mma" \
    "ESMT_EMU_DROP_BARRIER=cuda_attention_mma.cuh:$fwd" -- \
    "$build/bin/test_gpu_attention" --only "f16:$hd"
done
# The forward stages Q in the second K/V buffer on sm_80+: without the
# barrier after the warps read it, tile 1's cp.async overwrites it.
for hd in 32 64; do
  mutant "forward: barrier after reading the staged Q removed (line $qstage), bf16 hd $hd" \
    "cuda-emu: race: kernel attn_fwd_mma" \
    "ESMT_EMU_DROP_BARRIER=cuda_attention_mma.cuh:$qstage" -- \
    "$build/bin/test_gpu_attention" --only "bf16:$hd"
done
for hd in 32 64 128; do
  mutant "dK/dV loop-top barrier removed (line $dkdv), f16 hd $hd" "cuda-emu: race: kernel attn_bwd_dkdv_mma" \
    "ESMT_EMU_DROP_BARRIER=cuda_attention_mma.cuh:$dkdv" -- \
    "$build/bin/test_gpu_attention" --only "f16:$hd"
done
# Where the dK/dV kernel keeps K and V in registers (hd <= 32 on sm_80),
# the staging tile overlays only their (idle) tiles and this barrier
# protects nothing; at hd 128 the tile overlays operands other warps still
# read.
for hd in 128; do
  mutant "barrier before the fp32 staging tile removed (line $staging), f16 hd $hd" \
    "cuda-emu: race: kernel attn_bwd_dkdv_mma" \
    "ESMT_EMU_DROP_BARRIER=cuda_attention_mma.cuh:$staging" -- \
    "$build/bin/test_gpu_attention" --only "f16:$hd"
done
for hd in 32 64; do
  mutant "non-deterministic backward: barrier after the dS tile removed (line $dsbar), f16 hd $hd" \
    "cuda-emu: race: kernel attn_bwd_dkdvq_mma" \
    "ESMT_EMU_DROP_BARRIER=cuda_attention_mma.cuh:$dsbar" -- \
    "$build/bin/test_gpu_attention" --only "f16:$hd"
done
for hd in 32 128; do
  mutant "cp.async.wait_group removed (ESMT_EMU_DROP_CP_WAIT=1), bf16 hd $hd" \
    "has not written yet" "ESMT_EMU_DROP_CP_WAIT=1" -- \
    "$build/bin/test_gpu_attention" --only "bf16:$hd"
done
# sm_90's wgmma forward (cuda_attention_wgmma.cuh): its loop-top barrier
# (after each thread's fence.proxy.async) and the proxy fence itself. (Its
# buffer-retiring barrier is retire_tile's above; with it removed the first
# case's dK/dV kernel, 3 query tiles at T 77, reports before any forward
# has 3 key tiles, so that mutant cannot single out the forward.)
wg=$src/backends/cuda_common/cuda_attention_wgmma.cuh
wg_top=$(awk '/fence_proxy_async\(\);  \/\/ this thread/ { print NR + 1; exit }' "$wg")
[ -n "$wg_top" ] && sed -n "${wg_top}p" "$wg" | grep -q '__syncthreads();' ||
  { echo "FAIL: mutants.sh: no loop-top barrier after the proxy fence in $wg"; exit 1; }
mutant "wgmma forward: loop-top barrier removed (line $wg_top), bf16 hd 64, sm_90" \
  "cuda-emu: race: kernel attn_fwd_wgmma" "ESMT_EMU_SM=90" "ESMT_CUDA_ATTN_WGMMA=1" \
  "ESMT_EMU_DROP_BARRIER=cuda_attention_wgmma.cuh:$wg_top" -- \
  "$build/bin/test_gpu_attention" --only "bf16:64"
mutant "wgmma forward: fence.proxy.async removed (ESMT_EMU_DROP_PROXY_FENCE=1), f16 hd 64, sm_90" \
  "fence.proxy.async" "ESMT_EMU_SM=90" "ESMT_CUDA_ATTN_WGMMA=1" "ESMT_EMU_DROP_PROXY_FENCE=1" -- \
  "$build/bin/test_gpu_attention" --only "f16:64"
# A warp reduction's mask 0xffffffff written 0x0000ffff (the attention
# kernels' row max and sum are warp shuffles).
mutant "every __shfl_*_sync mask narrowed to 0x0000ffff (ESMT_EMU_SHFL_MASK), f16 hd 64" \
  "cuda-emu: warp-sync: kernel attn_" "ESMT_EMU_SHFL_MASK=0x0000ffff" -- \
  "$build/bin/test_gpu_attention" --only "f16:64"
mutant "offload: the host's waits for its copies removed (ESMT_EMU_DROP_HOST_SYNC=1)" \
  "cuda-emu: host-sync: host code at" "ESMT_EMU_DROP_HOST_SYNC=1" -- "$build/bin/test_gpu_offload"
mutant "offload: the copy stream's event wait removed" "cuda-emu: stream-order" \
  "ESMT_EMU_DROP_EVENT_WAIT=1" -- "$build/bin/test_gpu_offload"
mutant "stream: the wait for a layer's weight upload removed" "cuda-emu: stream-order" \
  -- "$build/bin/test_gpu_offload" --mutant weights
# The compute stream's wait for a slot's copy to the host, before backward
# writes the slot again (a device-side event wait).
mutant "stream: a gradient slot reused before its copy to the host finished" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_offload" --mutant gradients
# The host-sums worker's wait for a copy before it adds the bounce buffer
# (memory/host_sums.c): the pinned-page guard reports the early read.
mutant "stream: the host sums a bounce buffer before its copy landed" \
  "cuda-emu: host-sync: host code at" -- "$build/bin/test_gpu_offload" --mutant host-sums
# ZeRO-2's gradient slots (memory/grad_shard.c, nccl_dp with one rank):
# backward zeroing a slot before the comm stream's reduction of its
# previous part is done, and the norm reading the shard before the comm
# stream's last add (a backward through the model's API, without the
# trainer's wait for the comm stream).
mutant "ZeRO-2: a gradient slot zeroed before its reduce-scatter finished" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_nccl_dp" --mutant slot-wait
mutant "ZeRO-2: the shard read before the comm stream's last add" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_nccl_dp" --mutant shard-wait
# ZeRO-3's weight slots (memory/weight_gather.c, dist/dp_zero.c): the
# all-gather into a slot started without waiting for the compute stream
# (the rank's piece, the slot's previous part still read), a layer
# reading its slot without waiting for the all-gather, and the embedding
# read before the end parts' all-gather after an update finished.
mutant "ZeRO-3: a weight slot all-gathered before the compute stream's piece and reads" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_nccl_dp" --mutant gather-ready
mutant "ZeRO-3: a layer read its weight slot before the all-gather finished" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_nccl_dp" --mutant gather-loaded
mutant "ZeRO-3: the end parts read before their all-gather after an update" \
  "cuda-emu: stream-order" -- "$build/bin/test_gpu_nccl_dp" --mutant gather-ends

# The per-op profile's wait for its events before it reads their times
# (model/model_profile.c): intervals still running are counted as untimed,
# which the test refuses.
mutant "profile: events read back before they completed" "untimed" \
  "ESMT_TEST_PROFILE_BACKEND=ampere_bf16" -- "$build/bin/test_profile" --mutant sync

# Source mutants: NAME EXPECTED FILE SED TU -- COMMAND... (COMMAND finds the
# mutated backends through ESMT_TEST_BACKEND_DIR / ESMTRAIN_BACKEND_PATH).
muts=$(mktemp -d /tmp/esmt-emu-mutants-XXXXXX)
trap 'rm -rf "$muts"' EXIT
src_mutant() {
  local name=$1 want=$2 file=$3 expr=$4 tu=$5 dir
  shift 6
  dir=$muts/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_' | cut -c1-40)
  if ! bash "$src/tests/gpu/emu/source_mutant.sh" "$build" "$dir" "$file" "$expr" "$tu" \
       ampere_bf16 >"$dir.log" 2>&1; then
    echo "FAIL: $name: the mutant did not build"; tail -5 "$dir.log"; fail=$((fail + 1)); return
  fi
  mutant "$name" "$want" "ESMT_TEST_BACKEND_DIR=$dir/backends" \
    "ESMTRAIN_BACKEND_PATH=$dir/backends" -- "$@"
}
cli=$build/bin/esmtrain-example
awk 'BEGIN { srand(3); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 40; r++) { printf(">p%d\n", r); n = 20 + int(rand() * 40);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$muts/prot.fa"
"$cli" ingest "$muts/prot.fa" -o "$muts/data" --valid-fraction 0.1 --quiet >/dev/null
step1=("$cli" train --data "$muts/data" --layers 1 --width 32 --heads 2 --max-len 64
       --batch-tokens 512 --warmup 0 --steps 1 --eval-every 0 --keep 0 --no-mfu --threads 1
       --set backend.name=ampere_bf16 --out "$muts/run")
xent='/void xent_sum/,/^}/'
src_mutant "xent_sum: static __shared__ written only by threads with rows" \
  "cuda-emu: initcheck: kernel xent_sum" cuda_xent.cu \
  "${xent}s/  sh\[threadIdx.x\] = acc;/  if (acc != 0.0) sh[threadIdx.x] = acc;/" cuda_xent.cu -- \
  "${step1[@]}"
src_mutant "xent_sum: the last 6 barriers of the reduction dropped (warp-synchronous)" \
  "of its own warp read, with no __syncwarp" cuda_xent.cu \
  "${xent}s/    __syncthreads();/    if (s > 32) __syncthreads();/" cuda_xent.cu -- "${step1[@]}"
src_mutant "AdamW: (1 - b2) written (1 - b1) in the second moment" "COMPARE_RESULT.*FAIL" \
  cuda_optimizer.cu 's/const float vi = b2 \* v\[j\] + (1.0f - b2)/const float vi = b2 * v[j] + (1.0f - b1)/' \
  cuda_optimizer.cu -- bash "$src/tests/gpu/emu/gpu_matches_cpu.sh" "$cli" ampere_bf16
src_mutant "GELU: 1/sqrt(2) 14% too large (the GEMM epilogue's gelu_erf)" "COMPARE_RESULT.*FAIL" \
  cuda_kernels.cuh '/float gelu_erf(float x)/,/^}/s/erff(x \* 0.70710678118654752f)/erff(x * 0.80610173f)/' \
  cuda_gemm.cu -- bash "$src/tests/gpu/emu/gpu_matches_cpu.sh" "$cli" ampere_bf16
# A fragment-layout error: the forward's output rows of the accumulator's
# second half (PTX: rows g and g + 8 of the m16n8 C fragment) written 4
# rows off. Only numbers can show it; test_gpu_attention's show it widely.
src_mutant "attention forward: the C fragment's second rows at g + 4, not g + 8" \
  "FAIL\|cuda-emu: race" cuda_attention_mma.cuh 's/  const int r1 = r0 + 8;/  const int r1 = r0 + 4;/' \
  cuda_attention_f16.cu -- "$build/bin/test_gpu_attention" --only "f16:64"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
