#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stage an install of the build tree, move it elsewhere (a relocated
# prefix), then build an out-of-tree consumer with pkg-config and with
# find_package(esmtrain), and run both: each must find the installed cpu
# backend. Usage: test_install.sh SRC_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
stage=$(mktemp -d /tmp/esmt-install-XXXXXX)
root=$stage
trap 'rm -rf "$root"' EXIT

# Nothing may depend on the prefix given at install time.
stage=$(bash "$src/tests/install/stage_prefix.sh" "$build" "$stage")
test -f "$stage/include/esmtrain/esmtrain.h"
test -f "$stage/include/esmtrain/data.h"
test -f "$stage/include/esmtrain/config.h"
test -f "$stage/include/esmtrain/trainer.h"
test -f "$stage/include/esmtrain/base.h"
test -f "$stage/include/esmtrain/philox.h" # the dropout op's generator, for backend plugins
# plugins in a directory of their version: two versions in one prefix coexist
test -f "$stage/lib/esmtrain-0.2/backends/cpu.so" || test -f "$stage"/lib*/esmtrain-0.2/backends/cpu.so
libdir=$(dirname "$(ls "$stage"/lib*/libesmtrain.so | head -1)")

echo "== pkg-config consumer"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs esmtrain)
if [[ "$flags" != *"-I$stage/"* || "$flags" != *"-L$stage/"* ]]; then
  echo "esmtrain.pc does not point into the moved prefix $stage: $flags" >&2; exit 1
fi
echo "pkg-config: $flags"
cc -std=c11 -Wall -Werror "$src/examples/consumer/consumer.c" $flags -Wl,-rpath,"$libdir" \
   -o "$stage/consumer-pc"
"$stage/consumer-pc" "$stage/"
cc -std=c11 -Wall -Werror "$stage/share/doc/esmtrain/examples/minimal_train.c" $flags -lm \
   -Wl,-rpath,"$libdir" -o "$stage/minimal-train-pc"

# A tiny dataset through the installed CLI, for the training loops below.
awk 'BEGIN { srand(11); for (r = 0; r < 80; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 60);
  for (i = 0; i < n; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1));
  printf("\n") } }' > "$root/prot.fa"
"$stage/bin/esmtrain-example" ingest "$root/prot.fa" -o "$root/data" --quiet
"$stage/minimal-train-pc" "$root/data" 3

echo "== a consumer of the public API alone gets metrics.jsonl and TensorBoard events (#20)"
cc -std=c11 -Wall -Werror "$stage/share/doc/esmtrain/examples/trainer_run.c" $flags \
   -Wl,-rpath,"$libdir" -o "$stage/trainer-run-pc"
"$stage/trainer-run-pc" "$root/data" "$root/api-run" 6 >/dev/null
[ "$(grep -c '"kind":"train"' "$root/api-run/metrics.jsonl")" -eq 6 ] &&
  grep -q '"kind":"eval"' "$root/api-run/metrics.jsonl" ||
  { echo "trainer_run: metrics.jsonl lacks its 6 train lines or an eval line" >&2;
    cat "$root/api-run/metrics.jsonl" >&2; exit 1; }
ev=$(ls "$root/api-run"/events.out.tfevents.*.esmtrain)
[ -s "$ev" ] || { echo "trainer_run wrote no TensorBoard event file" >&2; exit 1; }
echo "metrics.jsonl: $(wc -l < "$root/api-run/metrics.jsonl") lines; $(basename "$ev"): $(stat -c %s "$ev") bytes"

bash "$src/tests/install/check_embed_example.sh" "$stage" "$libdir" "$root/api-run"

echo "== docs and the consumer example are installed"
test -f "$stage/share/doc/esmtrain/formats.md"
test -f "$stage/share/doc/esmtrain/examples/consumer/consumer.c"

echo "== find_package consumer"
# (the installed copy of the example project, as a user would build it)
cmake -S "$stage/share/doc/esmtrain/examples/consumer" -B "$root/consumer-build" \
      -DCMAKE_PREFIX_PATH="$stage" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/consumer-build" >/dev/null
"$root/consumer-build/consumer" "$stage/"
"$root/consumer-build/minimal_train" "$root/data" 3

echo "== the MPI communicator plugin builds against the installed headers alone"
test -f "$stage/include/esmtrain/comm_plugin.h"
if command -v mpicc >/dev/null; then
  # Only the prefix's include directory: none of the source tree's private headers.
  mkdir -p "$root/mpi-plugin"
  mpicc -std=c11 -Wall -Werror -fPIC -shared -fvisibility=hidden -I"$stage/include" \
        "$src"/plugins/comm_mpi/*.c -o "$root/mpi-plugin/mpi_comm.so"
  cat > "$root/mpi-plugin/table.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <esmtrain/comm_plugin.h>
/* The plugin loads and hands out a table of this ABI. */
int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) : NULL;
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  const esmt_comm_plugin *(*get)(void) =
      (const esmt_comm_plugin *(*)(void))dlsym(h, ESMT_COMM_PLUGIN_SYMBOL);
  const esmt_comm_plugin *p = get ? get() : NULL;
  if (!p || p->abi_version != ESMT_COMM_PLUGIN_ABI || p->struct_size < sizeof *p ||
      strcmp(p->name, "mpi") != 0) {
    fprintf(stderr, "%s: no esmt_comm_plugin of ABI %d\n", argv[1], ESMT_COMM_PLUGIN_ABI);
    return 1;
  }
  printf("%s: plugin '%s', ABI %u\n", argv[1], p->name, p->abi_version);
  return 0;
}
C
  cc -std=c11 -Wall -Werror -I"$stage/include" "$root/mpi-plugin/table.c" -ldl \
     -o "$root/mpi-plugin/table"
  "$root/mpi-plugin/table" "$root/mpi-plugin/mpi_comm.so"
else
  echo "skipped: no mpicc (the MPI plugin is not built here either)"
fi

# find_package(esmtrain VERSION) from a project of its own must fail
refused() {
  mkdir -p "$stage/v$1" && cat > "$stage/v$1/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.22)
project(want LANGUAGES C)
find_package(esmtrain $1 REQUIRED)
CM
  if cmake -S "$stage/v$1" -B "$stage/v$1/b" -DCMAKE_PREFIX_PATH="$stage" >/dev/null 2>&1; then
    echo "find_package(esmtrain $1) unexpectedly accepted this version" >&2; exit 1
  fi
}
echo "== before 1.0, another minor is another API: asking for 0.1 must fail"
refused 0.1
ls "$stage"/lib*/libesmtrain.so.0.2 >/dev/null || { echo "no libesmtrain.so.0.2 (SOVERSION 0.MINOR)" >&2; exit 1; }
echo "== asking for major 99 must fail"
refused 99
echo "== the installed tree stands on its own (#37)"
# nothing of the source or build tree is compiled into the library: a
# preset planted at the source path of the machine that built it is never
# read, and a moved prefix finds its own presets
lib=$(ls "$libdir"/libesmtrain.so.* | head -1)
for tree in "$src" "$build"; do
  if grep -aqF "$(realpath "$tree")/" "$lib"; then
    echo "$lib holds a path of $tree" >&2; exit 1
  fi
done
env -u ESMTRAIN_CONFIG_PATH "$stage/bin/esmtrain-example" config --preset cpu > "$root/cpu.yaml"
grep -q "backend" "$root/cpu.yaml" || { echo "config --preset cpu printed no configuration" >&2; exit 1; }
mkdir -p "$root/own-presets" && printf 'backend:\n  threads: 3\n' > "$root/own-presets/mine.yaml"
ESMTRAIN_CONFIG_PATH="$root/own-presets" "$stage/bin/esmtrain-example" config --preset mine \
  > "$root/mine.yaml"
grep -q "threads: 3" "$root/mine.yaml" || { echo "ESMTRAIN_CONFIG_PATH did not add a preset" >&2; exit 1; }
test -f "$stage/share/doc/esmtrain/README.md"
test -f "$stage/share/doc/esmtrain/LICENSE"
test -x "$stage/bin/esmtrain-convert-to-safetensors"
# a forced cpu backend maps no other plugin, no CUDA library, and leaves
# the environment as it was (OPENBLAS_CORETYPE)
cc -std=c11 -Wall -Werror "$src/tests/install/forced_cpu.c" $flags -Wl,-rpath,"$libdir" \
   -o "$stage/forced-cpu"
"$stage/forced-cpu"
"$stage/forced-cpu" env
# every public header and every *_INIT macro as C++17 -pedantic and C11
bash "$src/tests/install/check_cxx_headers.sh" "$stage/include" "$root/headers"
echo "install consumer test passed"
