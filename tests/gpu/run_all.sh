#!/usr/bin/env bash
# One call on a GPU machine: build everything (GPU backends included), run
# the whole ctest suite, the probe, and the benchmark table; copy logs to
# $OUT. Carry .gpu-deps (made by tests/gpu/fetch_deps.sh) with the call:
#   run(command="bash tests/gpu/run_all.sh", carry=[".gpu-deps"])
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/esmt-gpu-out}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }

# Unpack the Debian packages into a private prefix (never into /).
deps=/opt/esmt-deps
if [ -d .gpu-deps ]; then
  mkdir -p "$deps"
  for f in .gpu-deps/*.deb; do dpkg-deb -x "$f" "$deps"; done
  multi=$deps/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$multi/pkgconfig:$deps/usr/share/pkgconfig:$multi/openblas-pthread/pkgconfig
  export CMAKE_PREFIX_PATH=$deps/usr
  export LD_LIBRARY_PATH=$multi:$multi/openblas-pthread:${LD_LIBRARY_PATH:-}
  export CPATH=$deps/usr/include:$deps/usr/include/x86_64-linux-gnu:$deps/usr/include/x86_64-linux-gnu/openblas-pthread
  export LIBRARY_PATH=$multi:$multi/openblas-pthread
  # pkg-config files carry /usr prefixes: point them at the private prefix.
  for pc in $(find "$deps" -name '*.pc'); do sed -i "s|^prefix=/usr|prefix=$deps/usr|" "$pc"; done
fi

log "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv | tee -a "$out/summary.txt"
nvcc --version | tail -1 | tee -a "$out/summary.txt"

log "build (CUDA ON)"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DESMT_ENABLE_CUDA=ON -G Ninja \
  > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j16 > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }

log "probe"
./build-gpu/bin/esmtrain-example probe 2>&1 | tee -a "$out/summary.txt"

log "ctest"
(cd build-gpu && ctest --output-on-failure -j8) > "$out/ctest.log" 2>&1
tail -15 "$out/ctest.log" | tee -a "$out/summary.txt"

log "benchmarks"
for model in esm2_t6_8M esm2_t12_35M; do
  ./build-gpu/bin/esmtrain-example bench --model $model --batch 4 --seq 512 --steps 3 2>&1 \
    | grep -E 'ESMT_RESULT|tokens/s|MFU' | tee -a "$out/summary.txt"
done
log "optimizer offload (test_gpu_offload: agreement, throughput on/off, peak device memory)"
# The host AdamW (~28 B/param of host memory traffic, ~1 s for 650M) is paid
# once per update, so the ratio depends on micro-batches per update: 4 shows
# the per-update cost, 64 (~200K tokens; ESM-2 used ~2M) the amortised one.
for micro in 4 64; do
  ESMT_TEST_BACKEND_DIR=build-gpu/lib/esmtrain/backends ./build-gpu/bin/test_gpu_offload \
    --model esm2_t33_650M --batch 6 --seq 512 --micro $micro --updates 3 \
    > "$out/offload-micro$micro.log" 2>&1
  grep -E 'RESULT|SKIP' "$out/offload-micro$micro.log" | tee -a "$out/summary.txt"
done
log "attention kernels (bench_gpu_attention)"
./build-gpu/bin/bench_gpu_attention 2>&1 | tee -a "$out/summary.txt"
log "done"
