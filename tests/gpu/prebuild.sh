#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run on the build machine, before the GPU machine's run: builds the GPU
# backends and tests for the GPU's architecture and stages what run_all.sh
# needs in .gpu-prebuilt/ (ignored by git), so the GPU's time goes to tests
# and benchmarks rather than to nvcc. Valid when the build machine is x86-64
# and its nvcc has the GPU machine's CUDA major (run_all.sh prints both; a
# mismatch shows as a loader error there, and run_all.sh then builds there).
#
#   bash tests/gpu/fetch_deps.sh
#   bash tests/gpu/prebuild.sh [--arch 90a-real] [--alt SRC_TREE NAME]
#   # copy the checkout with .gpu-prebuilt/ to the GPU machine, then there:
#   ESMT_GPU_BUDGET=560 bash tests/gpu/run_all.sh test bench big
#
# --alt stages a second tree's attention kernels (a branch's worktree,
# already built in SRC_TREE/build-gpu) for run_all.sh's A/B attention bench.
# The staged set is kept under 64 MiB, small enough to copy: the trimmed,
# stripped build, the run-time .debs only (no -dev packages: nothing is
# compiled there) and DB.fasta.gz taken out of its package.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=90a-real
alt_src='' alt_name=''
while [ $# -gt 0 ]; do
  case $1 in
  --arch) arch=$2; shift 2 ;;
  --alt) alt_src=$2; alt_name=$3; shift 3 ;;
  *) echo "usage: prebuild.sh [--arch 90a-real] [--alt SRC_TREE NAME]" >&2; exit 2 ;;
  esac
done
[ -d .gpu-deps ] || { echo "prebuild.sh: run tests/gpu/fetch_deps.sh first" >&2; exit 1; }

# No plot (cairo and its X11/font libraries are not worth carrying there).
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DESMT_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DESMT_WITH_PLOT=OFF -G Ninja > /dev/null
cmake --build build-gpu -j"$(nproc)"

stage=.gpu-prebuilt
# Only ever remove what this script made (it writes the marker).
if [ -d "$stage" ]; then
  [ -f "$stage/.made-by-prebuild" ] || { echo "prebuild.sh: $stage exists and is not ours" >&2; exit 1; }
  rm -rf "$stage"
fi
mkdir -p "$stage/debs" && touch "$stage/.made-by-prebuild"
# The build minus objects, static archives and ninja's state; stripped.
tar -C . --exclude=CMakeFiles --exclude='*.a' --exclude='.ninja*' --exclude=build.ninja \
  --exclude=ptxas -cf - build-gpu | tar -C "$stage" -xf -
find "$stage/build-gpu" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
  'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
[ -f .gpu-deps/RUNTIME ] || { echo "prebuild.sh: rerun tests/gpu/fetch_deps.sh" >&2; exit 1; }
while read -r pkg; do cp .gpu-deps/"${pkg}"_*.deb "$stage/debs/"; done < .gpu-deps/RUNTIME
dpkg-deb --fsys-tarfile .gpu-deps/mmseqs2-examples_*.deb |
  tar -xOf - ./usr/share/doc/mmseqs2/example-data/DB.fasta.gz > "$stage/DB.fasta.gz"

if [ -n "$alt_src" ]; then
  mkdir -p "$stage/alt/backends"
  cp "$alt_src/build-gpu/bin/bench_gpu_attention" "$stage/alt/"
  cp "$alt_src/build-gpu/lib/esmtrain/backends/ampere_bf16.so" "$stage/alt/backends/"
  strip --strip-unneeded "$stage/alt/bench_gpu_attention" "$stage/alt/backends/"*.so
  echo "$alt_name" > "$stage/alt/NAME"
fi
du -sh "$stage"
echo "tracked files: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes (the call carries both)"
