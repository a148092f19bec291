#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GPU verification and benchmarks, every phase in order of importance under
# one optional time budget:
#   bash tests/gpu/run_all.sh test                       (builds build-gpu/ if needed)
#   ESMT_GPU_BUDGET=600 bash tests/gpu/run_all.sh test bench big offload curves
# Phases, in order of importance: test (probe, NVML, the GPU suites, then
# the CPU rest unless ESMT_GPU_CPU_SUITE=0), bench (attention TFLOP/s,
# esmtrain vs transformers, 650M with the non-deterministic backward), attn
# (the attention part of bench alone, 650M det/nondet at 512 and 1024), breakdown
# (issue #43: a 650M bf16 update's time per op and role, ESMT_PROFILE=events, at 8x512
# and 8x1024, against each item's roofline: breakdown.md), big
# (650M on real proteins, the 8 GiB budget,
# 3B), offload (optimizer offload on/off, nccl_dp world-1 overhead), stream
# (esm2_t36_3B fp16 in 8 GiB with weights streamed vs resident), curves
# (200 updates of 8M per backend against the cpu's loss curve), profile (ncu
# on the attention kernels), hostcpu (issue #18: the host CPU's bf16 GEMMs; cpu.so from 2 to 16 threads).
# A build made elsewhere for the card's arch (tests/gpu/prebuild.sh: same
# nvcc major, x86-64) is used when .gpu-prebuilt/ is present; .gpu-deps/
# (tests/gpu/fetch_deps.sh) holds the .debs for a machine without network.
# ESMT_GPU_BUDGET (seconds) clamps every step so the whole run ends in time;
# a step with no time left is logged as skipped.
# Writes $ESMT_GPU_OUT (default gpu-out/ in the checkout): summary.txt, one
# <phase>.log each and results-ops.txt. docs/gpu-measurements.md says how
# the figures are recorded.
set -uo pipefail
cd "$(dirname "$0")/../.."
phases=("${@:-test}")
out=${ESMT_GPU_OUT:-$PWD/gpu-out}
mkdir -p "$out"
# the runs' data and run directories: a fresh directory, removed at the end
work=$(mktemp -d "${TMPDIR:-/tmp}/esmt-gpu-XXXXXX")
trap 'rm -rf "$work"' EXIT
budget=${ESMT_GPU_BUDGET:-0} # 0: no overall limit
phase=setup
sum=$out/summary.txt # every phase's headings, exits and figures
log() { echo "== $*" | tee -a "$sum"; }
# ratio: the peer's step time over ours at the same B x T (the last
# ESMT_RESULT and PEER_RESULT lines of this phase's log). The peer's
# tokens_per_s counts only its rows' non-padding tokens, bench's rows are
# full: step time is the like-for-like figure.
ratio() {
  local ours theirs
  ours=$(grep ESMT_RESULT "$out/$phase.log" | tail -1 | sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p')
  theirs=$(grep PEER_RESULT "$out/$phase.log" | tail -1 | sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p')
  [ -n "$ours" ] && [ -n "$theirs" ] &&
    awk -v a="$ours" -v b="$theirs" 'BEGIN { printf("   RATIO %s: transformers %.1f ms / esmtrain %.1f ms per step = %.2fx\n", "'"$1"'", b, a, b / a) }' | tee -a "$sum"
}
# step NAME SECONDS CMD...: run with a time limit (clamped to what is left
# of ESMT_GPU_BUDGET), keep going on failure
step() {
  local name=$1 secs=$2
  shift 2
  if [ "$budget" -gt 0 ]; then
    local left=$((budget - SECONDS - 5))
    if [ "$left" -lt 20 ]; then
      log "$name: skipped, ${left} s of the budget left"
      return 124
    fi
    [ "$secs" -gt "$left" ] && secs=$left
  fi
  log "$name"
  local t0=$SECONDS
  timeout "$secs" "$@" >> "$out/${phase/setup/build}.log" 2>&1
  local rc=$?
  echo "   -> exit $rc in $((SECONDS - t0)) s" | tee -a "$sum"
  return $rc
}

# The peer (PyTorch) runs with the image's own loader path: ours below
# would put the toolkit's cuBLAS ahead of the one torch ships with.
orig_ld=${LD_LIBRARY_PATH:-}
peer=(env "LD_LIBRARY_PATH=$orig_ld" python3)
# Unpack the Debian packages into a private prefix (never into /).
deps=${ESMT_DEPS_DIR:-/opt/esmt-deps}
if compgen -G '.gpu-deps/*.deb' > /dev/null || compgen -G '.gpu-prebuilt/debs/*.deb' > /dev/null; then
  [ -f "$deps/.done" ] || mkdir -p "$deps"
fi
if [ -d "$deps" ] && [ ! -f "$deps/.done" ]; then
  for f in .gpu-deps/*.deb .gpu-prebuilt/debs/*.deb; do [ -f "$f" ] && dpkg-deb -x "$f" "$deps"; done
  for pc in $(find "$deps" -name '*.pc'); do sed -i "s|^prefix=/usr|prefix=$deps/usr|" "$pc"; done
  touch "$deps/.done"
fi
if [ -d "$deps" ]; then
  multi=$deps/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$multi/pkgconfig:$deps/usr/share/pkgconfig:$multi/openblas-pthread/pkgconfig
  export CMAKE_PREFIX_PATH=$deps/usr
  export LD_LIBRARY_PATH=$multi:$multi/openblas-pthread:${LD_LIBRARY_PATH:-}
  export CPATH=$deps/usr/include:$deps/usr/include/x86_64-linux-gnu:$deps/usr/include/x86_64-linux-gnu/openblas-pthread
  export LIBRARY_PATH=$multi:$multi/openblas-pthread
fi
# CUDA's own libraries (cuBLAS, cudart) and NCCL: the image may keep NCCL
# only in a Python wheel, so nccl_dp.so finds it through the loader path.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
for lib in libcublasLt.so.13 libnccl.so.2; do
  if ! ldconfig -p | grep -q "$lib " && ! compgen -G "/usr/local/cuda/lib64/$lib" > /dev/null; then
    found=$(find / -xdev -name "$lib" -path '*nvidia*' 2>/dev/null | head -1)
    [ -n "$found" ] && export LD_LIBRARY_PATH=$(dirname "$found"):$LD_LIBRARY_PATH
  fi
done
# A carried build (tests/gpu/prebuild.sh) keeps the absolute paths of the
# tree it was made in (ctest files, RPATHs): link that path to this tree.
if [ -d .gpu-prebuilt/build-gpu ] && [ ! -e build-gpu ]; then
  mv .gpu-prebuilt/build-gpu build-gpu
  home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build-gpu/CMakeCache.txt)
  if [ -n "$home" ] && [ "$home" != "$PWD" ] && [ ! -e "$home" ]; then
    mkdir -p "$(dirname "$home")" && ln -s "$PWD" "$home"
  fi
fi
fasta=$PWD/.gpu-prebuilt/DB.fasta.gz
[ -f "$fasta" ] || fasta=$deps/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
[ -f "$fasta" ] || fasta=$(find / -xdev -name DB.fasta.gz -path '*mmseqs*' 2>/dev/null | head -1)

log "machine ($(date -u +%F))"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv | tee -a "$sum"
nvcc --version | tail -1 | tee -a "$sum"
echo "   $(nproc) CPUs, $(uname -r), $(ldd --version | head -1)" | tee -a "$sum"

# Hopper SASS only: the full list (sm_75..90 + PTX) is CI's business and
# triples the build time.
if [ ! -x build-gpu/bin/esmtrain-example ]; then
  step "build (CUDA, sm_90)" 420 bash -c 'cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release \
      -DESMT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real -G Ninja && cmake --build build-gpu -j16' \
    || { tail -40 "$out/build.log"; exit 1; }
fi
E=./build-gpu/bin/esmtrain-example
# A library the image lacks shows here, before any step fails on it
ldd $E build-gpu/lib/esmtrain/backends/*.so build-gpu/bin/test_gpu_ops 2>&1 | grep 'not found' |
  sort -u | sed 's/^/   missing: /' | tee -a "$sum"
export ESMTRAIN_BACKEND_PATH=$PWD/build-gpu/lib/esmtrain/backends

phase_test() {
  step "probe" 60 $E probe; $E probe 2>&1 | tee -a "$sum" >/dev/null
  # NVML (issue #20): the trainer's per-step device figures and watch's GPU table,
  # beside nvidia-smi's own (the emulator only shows the plumbing)
  awk 'BEGIN { srand(7); for (r = 0; r < 400; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 90);
    for (i = 0; i < n; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1));
    printf("\n") } }' > $work/esmt-nvml.fa
  rm -rf $work/esmt-nvml-data $work/esmt-nvml-run
  $E ingest $work/esmt-nvml.fa -o $work/esmt-nvml-data --quiet >/dev/null
  step "NVML: 20 updates on ampere_bf16, watch --once, nvidia-smi" 120 bash -c "$E train \
      --data $work/esmt-nvml-data --layers 2 --width 64 --heads 4 --max-len 128 --steps 20 \
      --warmup 2 --eval-every 0 --log-every 5 --no-mfu --backend ampere_bf16 \
      --out $work/esmt-nvml-run && $E watch $work/esmt-nvml-run --once && nvidia-smi \
      --query-gpu=index,name,pci.bus_id,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw \
      --format=csv"
  grep -E "step 20/20|GPUs:|device util| C +[0-9]+ W|^[0-9]+, " "$out/$phase.log" | tail -10 >> "$sum"
  # GPU suites first, then everything else (the slow CPU crash tests last)
  # (gpu_fatbin_archs wants CI's full arch list; a prebuilt carries one arch)
  # (ESMT_GPU_TESTS: another ctest -R regex, e.g. test_gpu_attention after an attention change)
  local tests=${ESMT_GPU_TESTS:-"gpu|mixed|test_cpu_ops(_half)?$|model_reference|test_api|test_trainer|loss_scale|data_parallel"}
  step "GPU tests ($tests)" 300 bash -c "cd build-gpu && ctest -j4 -V --timeout 200 -R '$tests' \
      -E gpu_fatbin_archs"
  grep -E "RESULT .*FAIL|SKIP|tests passed|tests failed|Failed|\*\*\*" "$out/$phase.log" | tail -40 >> "$sum"
  # -V keeps passing tests' output (lines prefixed "NN: "): every op's and case's errors
  grep -E "^[0-9]+: RESULT" "$out/$phase.log" > "$out/results-ops.txt"
  # On sm_90 the forward above ran on mma.sync; the opt-in wgmma one too
  step "attention with ESMT_CUDA_ATTN_WGMMA=1 (wgmma forward on sm_90)" 120 bash -c \
    "cd build-gpu && ESMT_CUDA_ATTN_WGMMA=1 ctest --output-on-failure -R '^test_gpu_attention$'"
  grep -E "tests passed|tests failed|\(Failed\)" "$out/$phase.log" | tail -3 >> "$sum"
  [ "${ESMT_GPU_CPU_SUITE:-1}" = 0 ] && return 0
  step "rest of the suite" 240 bash -c 'cd build-gpu && ctest -j8 --output-on-failure \
      -E "gpu|mixed|kill_anywhere|alloc_faults|gpu_fatbin_archs"'
  grep -E "tests passed|tests failed|\(Failed\)" "$out/$phase.log" | tail -8 >> "$sum"
}

# The attention kernels (a deterministic and a "-nondet" row per shape), the A/B build's, and
# their peers: torch SDPA (flash, efficient, cuDNN) on the same shapes in the same call,
# FlashAttention-2's published figures beside them, and the ratio of each of our rows
# (fwd+bwd) to the best SDPA per shape
bench_attention() {
  step "attention kernels" 120 ./build-gpu/bin/bench_gpu_attention
  grep -iE "tflop|hd=|T=" "$out/$phase.log" | tail -30 | tee $work/esmt-attn-ours.txt >> "$sum"
  # the same kernels with sm_90's opt-in wgmma forward instead of mma.sync
  step "attention kernels, ESMT_CUDA_ATTN_WGMMA=1" 120 env ESMT_CUDA_ATTN_WGMMA=1 \
    ./build-gpu/bin/bench_gpu_attention
  grep -iE "tflop|hd=|T=" "$out/$phase.log" | tail -30 | sed 's/^/wgmma-fwd: /' >> "$sum"
  # A/B: another build's attention kernels (ESMT_GPU_ALT_ATTN=dir holding
  # bench_gpu_attention and backends/, tests/gpu/prebuild.sh --alt)
  alt=${ESMT_GPU_ALT_ATTN:-.gpu-prebuilt/alt}
  if [ -x "$alt/bench_gpu_attention" ]; then
    step "attention kernels, $(cat "$alt/NAME" 2>/dev/null || echo alternative)" 120 \
      "$alt/bench_gpu_attention" "$alt/backends"
    grep -iE "tflop|hd=|T=" "$out/$phase.log" | tail -30 >> "$sum"
  fi
  step "attention peers: torch SDPA, FlashAttention-2 as published" 150 "${peer[@]}" \
    bench/gpu/bench_attention_peer.py --quick --ours $work/esmt-attn-ours.txt
  grep -E "^sdpa-|published|ATTN_RATIO" "$out/$phase.log" | tail -50 >> "$sum"
}

# esmtrain bench of esm2_t33_650M bf16 at B x T with the default (deterministic) backward
# and with backend.deterministic false (atomic dQ in the attention backward)
bench_nondet() {
  for nd in "" --nondeterministic; do
    step "esmtrain bench esm2_t33_650M bf16 $1x$2 ${nd:-(deterministic)}" 150 $E bench \
      --model esm2_t33_650M --batch "$1" --seq "$2" --steps 10 --warmup 2 --backend ampere_bf16 \
      --precision bf16 $nd
    grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
  done
}

phase_attn() {
  bench_attention
  bench_nondet 8 512
  bench_nondet 8 1024
}

phase_bench() {
  bench_attention
  for model in esm2_t6_8M esm2_t33_650M; do
    step "esmtrain bench $model bf16 8x512 (ampere_bf16)" 150 $E bench --model $model --batch 8 \
      --seq 512 --steps 10 --warmup 2 --backend ampere_bf16 --precision bf16
    grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
    step "transformers $model bf16 8x512 (peer)" 240 "${peer[@]}" bench/gpu/bench_transformers.py \
      --model $model --batch 8 --seq 512 --dtype bf16 --steps 10
    grep PEER_RESULT "$out/$phase.log" | tail -1 >> "$sum"
    ratio "$model bf16 8x512"
  done
  step "esmtrain bench esm2_t33_650M fp16 6x512 (turing_fp16)" 150 $E bench \
    --model esm2_t33_650M --batch 6 --seq 512 --steps 10 --warmup 2 --backend turing_fp16 --precision fp16
  grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
  step "transformers esm2_t33_650M fp16 6x512 (peer)" 240 "${peer[@]}" bench/gpu/bench_transformers.py \
    --model esm2_t33_650M --batch 6 --seq 512 --dtype fp16 --steps 10
  grep PEER_RESULT "$out/$phase.log" | tail -1 >> "$sum"
  ratio "esm2_t33_650M fp16 6x512"
  bench_nondet 8 512
}

phase_breakdown() {
  # Issue #43: where a 650M bf16 update's time goes, per op and role on the device
  # (ESMT_PROFILE=events: timing events, no synchronisation) with the time between ops,
  # against each FLOP-counted item's time at the card's dense bf16 peak
  # (ESMT_GPU_PEAK_TFLOPS, default 989: H100/H200 SXM). One table per shape in breakdown.md.
  local peak=${ESMT_GPU_PEAK_TFLOPS:-989}
  for T in 512 1024; do
    local from
    from=$(wc -l < "$out/$phase.log" 2>/dev/null || echo 0)
    step "breakdown: esm2_t33_650M bf16 8x$T, ESMT_PROFILE=events" 150 env ESMT_PROFILE=events \
      $E bench --model esm2_t33_650M --batch 8 --seq $T --steps 6 --warmup 2 \
      --backend ampere_bf16 --precision bf16
    grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
    tail -n +"$((from + 1))" "$out/$phase.log" > "$work/breakdown-$T.log" # this run's lines
    { echo "### esm2_t33_650M bf16 8 x $T ($(git rev-parse --short HEAD 2>/dev/null))"
      python3 bench/step_breakdown.py --peak-tflops "$peak" "$work/breakdown-$T.log"; echo; } |
      tee -a "$out/breakdown.md" >> "$sum"
  done
}

phase_big() {
  # Real proteins, max length 1024, real tokens counted (issue #8), then
  # the 8 GiB budget (issue #7) and 3B with recompute.
  if [ -n "$fasta" ]; then
    step "ingest DB.fasta.gz" 120 $E ingest "$fasta" -o $work/esmt-db --max-len 1022 --quiet
    step "train 650M bf16 on DB.fasta.gz (ampere_bf16)" 300 $E train --preset esm2_t33_650M \
      --data $work/esmt-db --out $work/run-650m --backend ampere_bf16 --set backend.precision=bf16 \
      --set data.max_len=1024 --set data.pack=on --steps 30 --eval-every 0 --log-every 5 --warmup 5
    grep -E "step (10|20|30)/" "$out/$phase.log" | tail -3 >> "$sum"
    step "transformers 650M bf16 on DB.fasta.gz (peer)" 240 "${peer[@]}" bench/gpu/bench_transformers.py \
      --model esm2_t33_650M --batch 8 --seq 1024 --dtype bf16 --steps 10 --fasta "$fasta"
    grep PEER_RESULT "$out/$phase.log" | tail -1 >> "$sum"
  fi
  step "650M fp16 6x512 in 8 GiB (turing_fp16, device_memory_limit)" 300 $E train \
    --preset rtx2080super --data $work/esmt-db --out $work/run-8g --steps 3 --warmup 1 \
    --eval-every 0 --log-every 1
  # (the preset's update is ESM-2's ~2M tokens: ~33 s each on an H100)
  grep -E "step [0-9]+/3 |memory|offload|GiB" "$out/$phase.log" | tail -6 >> "$sum"
  step "3B bf16 with recompute" 300 $E bench --model esm2_t36_3B --batch 4 --seq 1024 --steps 3 \
    --warmup 1 --backend ampere_bf16 --precision bf16 --recompute
  grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
}

phase_offload() {
  # Optimizer offload (issue #7): agreement, tokens/s on/off, peak device memory. The host
  # AdamW (~28 B/param of host traffic, ~1 s for 650M) is paid once per update: 4
  # micro-batches show that cost, 64 (~200K tokens; ESM-2 used ~2M) the amortised one.
  for micro in 4 64; do
    step "offload 650M 6x512, $micro micro-batches per update" 200 env \
      ESMT_TEST_BACKEND_DIR=build-gpu/lib/esmtrain/backends ./build-gpu/bin/test_gpu_offload \
      --model esm2_t33_650M --batch 6 --seq 512 --micro $micro --updates 3
    grep -E "RESULT|SKIP" "$out/$phase.log" | tail -4 >> "$sum"
  done
  [ -f bench/gpu/bench_nccl_overhead.sh ] && step "nccl_dp world 1 overhead" 240 bash bench/gpu/bench_nccl_overhead.sh \
    && grep -E "RATIO|tokens/s" "$out/$phase.log" | tail -4 >> "$sum"
}

phase_stream() {
  # Streaming from host memory (issue #36): esm2_t36_3B fp16, weights and gradients streamed
  # in an 8 GiB budget, beside the resident run (an H100 holds it) at the same shape and
  # update, both with recompute; and the pinned H2D/D2H bandwidth. 16 x 512 a micro-batch
  # (~4 GiB planned) so that compute can hide the ~21 GiB each micro-batch moves;
  # ESMT_GPU_STREAM_MICRO micro-batches an update (256 is ESM-2's ~2M tokens).
  local micro=${ESMT_GPU_STREAM_MICRO:-8}
  step "3B fp16 16x512, $micro micro-batches: resident vs weights streamed in 8 GiB" 420 env \
    ESMT_TEST_BACKEND_DIR=build-gpu/lib/esmtrain/backends ESMT_OFFLOAD_BACKEND=turing_fp16 \
    ./build-gpu/bin/test_gpu_offload --model esm2_t36_3B --batch 16 --seq 512 --micro "$micro" \
    --updates 2 --precision fp16 --stream weights --device-limit 8GiB
  grep -E "RESULT|SKIP" "$out/$phase.log" | tail -4 >> "$sum"
}

phase_curves() {
  # 200 updates of 8M on real proteins: each GPU backend's curve against the cpu's
  # (the dataset is phase big's; ingested here when that phase did not run)
  if [ ! -d $work/esmt-db ] && [ -n "$fasta" ]; then
    step "ingest DB.fasta.gz" 120 $E ingest "$fasta" -o $work/esmt-db --max-len 1022 --quiet
  fi
  [ -d $work/esmt-db ] || log "curves: skipped, no dataset (DB.fasta.gz not found)"
  if [ -d $work/esmt-db ]; then
    curve=(--preset esm2_t6_8M --data $work/esmt-db --steps 200 --eval-every 0 --log-every 1
           --warmup 20 --set data.max_len=512 --set data.tokens_per_batch=8192 --no-mfu
           --set data.pack=off)  # auto packs on GPUs only: the same batches on every backend
    step "curve: cpu fp32 (16 threads)" 300 $E train "${curve[@]}" --out $work/curve-cpu --backend cpu
    for b in ampere_bf16:bf16 turing_fp16:fp16; do
      step "curve: ${b%%:*} ${b##*:}" 120 $E train "${curve[@]}" --out $work/curve-${b%%:*} \
        --backend ${b%%:*} --set backend.precision=${b##*:}
      python3 tests/gpu/compare_curves.py $work/curve-cpu/metrics.jsonl \
        $work/curve-${b%%:*}/metrics.jsonl 0.03 | tee -a "$sum"
    done
  fi
}

phase_profile() {
  # ncu on the attention kernels at issue #22's reference shape (B16 T512 H16 hd64): what
  # docs/attention-model.md leaves to a measurement (achieved occupancy, warp cycles per
  # issued instruction, tensor pipe and shared-memory throughput), main and the A/B build
  if ! command -v ncu > /dev/null; then log "profile: ncu is not on the PATH"; return 0; fi
  local sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats
                  --section LaunchStats --section MemoryWorkloadAnalysis)
  step "ncu: attention kernels, main" 150 ncu "${sections[@]}" -k regex:attn_ -c 6 \
    ./build-gpu/bin/bench_gpu_attention build-gpu/lib/esmtrain/backends 16 512 16 64
  local alt=${ESMT_GPU_ALT_ATTN:-.gpu-prebuilt/alt}
  [ -x "$alt/bench_gpu_attention" ] && step "ncu: attention kernels, $(cat "$alt/NAME")" 150 \
    ncu "${sections[@]}" -k regex:attn_ -c 6 "$alt/bench_gpu_attention" "$alt/backends" 16 512 16 64
  step "ncu: attention forward, wgmma (ESMT_CUDA_ATTN_WGMMA=1, sm_90)" 150 \
    env ESMT_CUDA_ATTN_WGMMA=1 ncu "${sections[@]}" -k regex:attn_fwd_wgmma -c 2 \
    ./build-gpu/bin/bench_gpu_attention build-gpu/lib/esmtrain/backends 16 512 16 64
  step "ncu: attention kernels, non-deterministic backward" 150 ncu "${sections[@]}" \
    -k regex:"attn_bwd_(dot|dkdvq_mma|dq_store)" -c 3 \
    ./build-gpu/bin/bench_gpu_attention build-gpu/lib/esmtrain/backends 16 512 16 64 nondet
  grep -E "attn_[a-z_]+|Duration|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Shared Memory" \
    "$out/$phase.log" | sed 's/^ *//' | cut -c1-160 >> "$sum"
}

phase_hostcpu() {
  # Issue #18: bf16 vs fp32 GEMMs on this machine's CPU (AVX512-BF16/AMX, which the
  # development host lacks), through PyTorch; and cpu.so's fp32/bf16 bench on 2 threads
  step "host CPU: bf16 vs fp32 GEMMs (PyTorch)" 120 "${peer[@]}" bench/gpu/bench_host_bf16_gemm.py
  grep -E "HOST_" "$out/$phase.log" >> "$sum"
  for p in fp32 bf16; do
    step "cpu.so bench esm2_t6_8M 4x512 $p, 2 threads" 120 $E bench --model esm2_t6_8M \
      --batch 4 --seq 512 --steps 3 --warmup 1 --backend cpu --precision $p --threads 2
    grep ESMT_RESULT "$out/$phase.log" | tail -1 >> "$sum"
  done
  # Issue #43 item 4: cpu.so's scaling from 2 to 16 threads (fp32), as tokens/s against 2
  local base=
  for n in 2 4 8 16; do
    step "cpu.so bench esm2_t6_8M 4x512 fp32, $n threads" 120 $E bench --model esm2_t6_8M \
      --batch 4 --seq 512 --steps 3 --warmup 1 --backend cpu --precision fp32 --threads $n
    local tps
    tps=$(grep ESMT_RESULT "$out/$phase.log" | tail -1 | sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p')
    [ -n "$tps" ] || continue
    [ -n "$base" ] || base=$tps
    awk -v n="$n" -v t="$tps" -v b="$base" 'BEGIN { printf("   SCALING cpu.so %2d threads: %.0f tokens/s, %.2fx of 2 threads\n", n, t, t / b) }' | tee -a "$sum"
  done
}

for phase in "${phases[@]}"; do
  case $phase in
  test | bench | attn | breakdown | big | offload | stream | curves | profile | hostcpu) ;;
  *) echo "usage: run_all.sh [test] [bench] [attn] [breakdown] [big] [offload] [stream] [curves] [profile] [hostcpu]"; exit 2 ;;
  esac
  log "phase $phase"
  "phase_$phase"
  log "done ($phase) at ${SECONDS} s"
done
cat "$sum"
