#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nccl_dp end to end through `launch`, on two emulated GPUs (host CUDA
# emulator, ESMT_EMU_DEVICES=2, one per rank by LOCAL_RANK), fp32 compute:
#   - 2 ranks with nccl_dp end where 1 process on ampere_bf16 accumulating
#     both micro-batches of each update ends (packed rows of ~512 real
#     tokens, so tokens_per_update 513 takes exactly two): the two sum the
#     gradients in another order, so within 5e-4 relative per tensor, the
#     attention key bias left out (its gradient is rounding noise: softmax
#     cancels it). The worst is a LayerNorm bias that starts at 0, where
#     AdamW turns fp32 rounding differences into whole steps; it depends on
#     the GEMM kernels OpenBLAS picks for the CPU under the emulated cuBLASLt:
#     6.7e-5 on an AVX2 host, 2.3e-4 on an AVX-512 (Cooperlake kernels) one;
#   - 3 ranks (3 emulated GPUs) end where 1 process accumulating three
#     micro-batches (tokens_per_update 1025) ends (2e-4; measured 8.5e-5);
#   - dist.zero 1 (ncclReduceScatter + ncclAllGather) ends where dist.zero 0
#     does, without clipping;
#   - the single-process GPU run ends where cpu.so does (2e-2 relative L2 per
#     tensor, the bound of gpu_matches_cpu.sh: measured 5.4e-3): the GPU-vs-GPU
#     comparisons above cannot see a kernel both sides share (AdamW's
#     (1 - b2) written (1 - b1) passes them, and gives 1.2 here);
#   - dist.zero 2 (each part's gradient slot reduce-scattered on the comm
#     stream as backward finishes it, the rank's piece added into its
#     shard): 2 ranks x 2 micro-batches end where 1 process
#     accumulating the four ends (tokens_per_update 1537), and with one
#     micro-batch per rank bit for bit where dist.zero 1 ends;
#   - dist.zero 3 (each rank keeps its shard of the weights; each layer's
#     all-gathered into a slot on the comm stream before it runs, the next
#     prefetched): bit for bit where dist.zero 2 ends, with 2 micro-batches
#     per rank and with one;
#   - a rank killed mid-run makes the other stop with a message naming it,
#     and the launcher fails, within the communication timeout (no hang);
#   - rank 1 killed by the emulator (ESMT_EMU_NCCL_KILL) half-way through
#     the first chunk of an exact collective, the survivor's collective left
#     hanging as NCCL's one-node transports leave it: in update 2's
#     all-gather at dist.zero 1 and in one of its reduce-scatters at
#     dist.zero 2, rank 0 stops on its own within seconds naming rank 1 and
#     the reason, the launcher names rank 1's status, and the step-1
#     checkpoint stays `latest`, bit for bit what an unbroken run saves;
# and the emulator reports nothing.
# Usage: dp_emulated.sh CLI [kills] ("kills": the exact-collective kills only)
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/esmt-emu-dp-XXXXXX)
trap 'rm -rf "$work"' EXIT
export ESMT_EMU_DEVICES=2 ESMT_EMU_SM=80 ESMT_EMU_STRICT=1 ESMTRAIN_COMM_TIMEOUT=60
awk 'BEGIN { srand(5); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 300; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 60);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
common=(--data "$work/data" --layers 2 --width 64 --heads 4 --max-len 64 --batch-tokens 512
        --warmup 2 --eval-every 0 --log-every 1 --keep 0 --no-mfu --threads 1
        --set data.pack=on --set backend.precision=fp32 --set train.grad_clip=0)
pass=0
fail=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; pass=$((pass + 1)); else echo "FAIL: $what"; fail=$((fail + 1)); fi
}
quiet_emulator() {  # LOG: no finding of the emulator's checkers
  if grep -q "cuda-emu:" "$1"; then grep "cuda-emu:" "$1" | head -20; return 1; fi
}
train1() {  # NAME ARGS...: one process
  local name=$1
  shift
  "$cli" train "${common[@]}" --out "$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; return 1; }
  quiet_emulator "$work/$name.log"
}
launch2() {  # NAME ARGS...: two ranks
  local name=$1
  shift
  "$cli" launch -n 2 train "${common[@]}" --out "$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; return 1; }
  quiet_emulator "$work/$name.log"
}
ckpt() { echo "$work/$1/checkpoints/step-$(printf %08d "$2")/model.safetensors"; }

# NAME KIND N ZERO: rank 1 dies in its N-th KIND (as the emulator counts:
# from the communicator's test all-reduce on, a group of ncclBroadcast or
# ncclReduce calls counted as one allgather or reducescatter), 3 updates
# saved every one.
killed_at() {
  local name=$1 kind=$2 n=$3 zero=$4 rc=0
  ESMT_EMU_NCCL_KILL=1:$kind:$n ESMTRAIN_COMM_TIMEOUT=30 "$cli" launch -n 2 train "${common[@]}" \
    --steps 3 --save-every 1 --out "$work/$name" --set backend.name=nccl_dp --set dist.force=true \
    --set dist.zero="$zero" > "$work/$name.log" 2>&1 || rc=$?
  local log=$work/$name.log end killed_at_s took
  end=$(date +%s.%N)
  killed_at_s=$(sed -n 's/.*ESMT_EMU_NCCL_KILL: rank 1 killed in its .* at \([0-9.]*\)$/\1/p' "$log")
  took=$(awk -v a="${killed_at_s:-0}" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "   launcher exit $rc, $took s after the kill"
  check "$name: the emulator killed rank 1 in its $kind #$n" test -n "$killed_at_s"
  check "$name: the launcher fails, naming rank 1's status" \
    grep -q "launch: rank 1 exited with status 137" "$log"
  check "$name: launcher exit status non-zero" test "$rc" -ne 0
  check "$name: rank 0 stops on its own, naming rank 1 and the reason" \
    grep -q "rank 0 of 2.*rank 1 failed: connection lost (the process exited or was killed)" "$log"
  check "$name: rank 0 was not signalled by the launcher" eval '! grep -q "still running" "$log"'
  check "$name: stopped within 10 s of the kill" awk -v t="$took" 'BEGIN { exit !(t < 10) }'
  check "$name: no finding of the emulator" \
    eval '! grep "cuda-emu:" "$log" | grep -v ESMT_EMU_NCCL_KILL'
  check "$name: latest is step 1" grep -qx "step-00000001" "$work/$name/checkpoints/latest"
  check "$name: nothing else in checkpoints/" \
    test "$(ls -A "$work/$name/checkpoints" | tr '\n' ' ')" = "latest step-00000001 "
  check "$name: the step-1 checkpoint is an unbroken run's, bit for bit" \
    python3 "$here/compare_checkpoints.py" "$(ckpt zref 1)" "$(ckpt "$name" 1)" 0
}
echo "== rank 1 killed by the emulator inside an exact collective"
check "2 ranks, dist.zero 1, 3 updates (the reference checkpoints)" launch2 zref --steps 3 \
  --save-every 1 --set backend.name=nccl_dp --set dist.force=true --set dist.zero=1
# Update 2's all-gather (one per update at stage 1, after the test
# all-reduce) and the second of its four gradient slots' reduce-scatters
# at stage 2 (mid-backward).
killed_at kill_ag allgather 2 1
killed_at kill_rs reducescatter 6 2
if [ "${2:-}" = kills ]; then echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; fi

echo "== 2 ranks (nccl_dp) vs 1 process accumulating both micro-batches"
check "1 process, ampere_bf16, 2 micro-batches per update" \
  train1 acc --steps 6 --set backend.name=ampere_bf16 --set train.tokens_per_update=513
check "2 ranks, nccl_dp" launch2 dp --steps 6 --set backend.name=nccl_dp --set dist.force=true
check "the weights agree" python3 "$here/compare_checkpoints.py" "$(ckpt acc 6)" "$(ckpt dp 6)" 5e-4 --skip attention.self.key.bias

echo "== the 1-process GPU run vs cpu.so (a kernel both GPU runs share is wrong in both)"
check "1 process, cpu.so, 2 micro-batches per update" \
  train1 cpu --steps 6 --set backend.name=cpu --set train.tokens_per_update=513
check "ampere_bf16 ends where cpu.so does" python3 "$here/compare_checkpoints.py" \
  "$(ckpt cpu 6)" "$(ckpt acc 6)" 2e-2 --skip attention.self.key.bias

echo "== 3 ranks (nccl_dp) vs 1 process accumulating three micro-batches"
check "1 process, ampere_bf16, 3 micro-batches per update" \
  train1 acc3 --steps 4 --set backend.name=ampere_bf16 --set train.tokens_per_update=1025
check "3 ranks, nccl_dp" env ESMT_EMU_DEVICES=3 "$cli" launch -n 3 train "${common[@]}" \
  --out "$work/dp3" --steps 4 --set backend.name=nccl_dp --set dist.force=true
check "the weights agree" python3 "$here/compare_checkpoints.py" "$(ckpt acc3 4)" "$(ckpt dp3 4)" \
  2e-4 --skip attention.self.key.bias

echo "== ZeRO-1 (reduce-scatter + all-gather) vs plain"
check "2 ranks, nccl_dp, dist.zero 1" launch2 zero --steps 6 --set backend.name=nccl_dp \
  --set dist.force=true --set dist.zero=1
check "ZeRO-1 ends where plain data parallelism does" \
  python3 "$here/compare_checkpoints.py" "$(ckpt dp 6)" "$(ckpt zero 6)" 1e-6

echo "== ZeRO-2 (gradient slots reduce-scattered per part) vs 1 process and ZeRO-1"
check "1 process, ampere_bf16, 4 micro-batches per update" \
  train1 acc4 --steps 4 --set backend.name=ampere_bf16 --set train.tokens_per_update=1537
check "2 ranks x 2 micro-batches, nccl_dp, dist.zero 2" launch2 zero2 --steps 4 \
  --set backend.name=nccl_dp --set dist.force=true --set dist.zero=2 \
  --set train.tokens_per_update=1537
check "the banner says ZeRO-2" grep -q "reduce-scattered (ZeRO-2)" "$work/zero2.log"
check "ZeRO-2 ends where 1 process accumulating the four does" \
  python3 "$here/compare_checkpoints.py" "$(ckpt acc4 4)" "$(ckpt zero2 4)" 5e-4 \
  --skip attention.self.key.bias
check "2 ranks x 1 micro-batch, dist.zero 2" launch2 zero2one --steps 6 \
  --set backend.name=nccl_dp --set dist.force=true --set dist.zero=2
check "ZeRO-2 with one micro-batch per rank is ZeRO-1, bit for bit" \
  python3 "$here/compare_checkpoints.py" "$(ckpt zero 6)" "$(ckpt zero2one 6)" 0

echo "== ZeRO-3 (weights sharded, gathered per layer) vs ZeRO-2"
check "2 ranks x 2 micro-batches, nccl_dp, dist.zero 3" launch2 zero3 --steps 4 \
  --set backend.name=nccl_dp --set dist.force=true --set dist.zero=3 \
  --set train.tokens_per_update=1537
check "the banner says ZeRO-3" grep -q "reduce-scattered (ZeRO-3)" "$work/zero3.log"
check "ZeRO-3 ends where ZeRO-2 does, bit for bit" \
  python3 "$here/compare_checkpoints.py" "$(ckpt zero2 4)" "$(ckpt zero3 4)" 0
check "2 ranks x 1 micro-batch, dist.zero 3" launch2 zero3one --steps 6 \
  --set backend.name=nccl_dp --set dist.force=true --set dist.zero=3
check "ZeRO-3 with one micro-batch per rank is ZeRO-1, bit for bit" \
  python3 "$here/compare_checkpoints.py" "$(ckpt zero 6)" "$(ckpt zero3one 6)" 0

echo "== rank 1 killed mid-run"
"$cli" launch -n 2 train "${common[@]}" --steps 100000 --save-every 2 --out "$work/kill" \
  --set backend.name=nccl_dp --set dist.force=true > "$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -f "$work/kill/checkpoints/latest" ] && break; sleep 0.1; done
victim=
for c in $(pgrep -P "$pid"); do
  if tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx 'RANK=1'; then victim=$c; fi
done
if [ -n "$victim" ]; then kill -KILL "$victim"; fi
start=$SECONDS
set +e
wait "$pid"
rc=$?
set -e
echo "   launcher exit $rc after $((SECONDS - start)) s"
check "a victim was found and killed" test -n "$victim"
check "the launcher fails" test "$rc" -ne 0
check "rank 0 names the dead rank" grep -q "rank 1" "$work/kill.log"
check "no hang (stopped within the timeout)" test $((SECONDS - start)) -lt 90

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
