#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build emulated GPU backends from a mutated copy of backends/cuda_common,
# for the mutations no run-time switch can make (a constant, a coefficient,
# a missing initialisation): the sources are copied to OUT/cuda_common, SED
# is applied to FILE there (it must change it), each TU (a cuda_common .cu
# file) is compiled from the copy with the build's own flags, and each
# backend is relinked with those objects ahead of the unmutated library
# into OUT/backends, next to links to the build's other backends. Point
# ESMT_TEST_BACKEND_DIR or ESMTRAIN_BACKEND_PATH at OUT/backends.
# Usage: source_mutant.sh BUILD_DIR OUT FILE SED TU[,TU...] BACKEND[,BACKEND...]
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
file=$3
expr=$4
IFS=, read -r -a tus <<<"$5"
IFS=, read -r -a backends <<<"$6"
src=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out/cuda_common" "$out/obj" "$out/backends"
cp "$src"/backends/cuda_common/*.{cu,cuh,h} "$out/cuda_common/"
sed -i -e "$expr" "$out/cuda_common/$file"
if cmp -s "$src/backends/cuda_common/$file" "$out/cuda_common/$file"; then
  echo "source_mutant.sh: '$expr' changes nothing in $file" >&2
  exit 1
fi
dir=$build/backends/cuda_common/CMakeFiles/esmt_cuda_common.dir
flag() { sed -n "s/^$1 = //p" "$dir/flags.make"; }
objs=()
for tu in "${tus[@]}"; do
  echo "#include \"$out/cuda_common/$tu\"" > "$out/obj/emu_$tu.cpp"
  # The flags of the build's own rule for this TU (the per-file sanitizer
  # options follow $(CXX_FLAGS) in build.make).
  extra=$(grep -m1 "emu_${tu%.cu}.cpp.o -c " "$dir/build.make" |
          sed -e 's/.*\$(CXX_FLAGS)//' -e 's/ -MD .*//')
  eval "c++ -w $(flag CXX_DEFINES) -I$out/cuda_common $(flag CXX_INCLUDES) $(flag CXX_FLAGS) $extra \
        -c $out/obj/emu_$tu.cpp -o $out/obj/emu_$tu.o"
  objs+=("$out/obj/emu_$tu.o")
done
for so in "$build"/lib/esmtrain/backends/*.so; do ln -sf "$so" "$out/backends/"; done
for b in "${backends[@]}"; do
  bdir=$build/backends/$b/CMakeFiles/esmt_backend_$b.dir
  rm -f "$out/backends/$b.so"
  link=$(sed -e "s| -o [^ ]*\.so | -o $out/backends/$b.so |" \
             -e "s|\.\./cuda_common/libesmt_cuda_common.a|${objs[*]} &|" "$bdir/link.txt")
  (cd "$build/backends/$b" && eval "$link")
done
