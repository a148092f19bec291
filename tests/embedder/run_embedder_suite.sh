#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The embedder suite (#37): programs of one's own against an installed and
# moved prefix of BUILD_DIR, built with pkg-config and with find_package,
# under the sanitizer the library was built with (address, thread, or
# none), and run with the source and build trees hidden: an empty tmpfs
# mounted over each in a user and mount namespace (`unshare -rm`), or,
# where namespaces are refused, every file the runs open traced with
# strace and none may lie in those trees. Covered: two threads on one
# model, a second trainer into a run, a library trainer against the CLI
# holding run.lock (test_threads, test_run_dir); tokenize and embed with a
# protein longer than the window (embedder_infer); the API's score equal
# to the CLI's (examples/embed.c); presets of the moved prefix; a forced
# cpu backend mapping no CUDA library, the environment unchanged
# (forced_cpu.c); C++17 -pedantic over every header and _INIT macro.
# Usage: run_embedder_suite.sh SRC_DIR BUILD_DIR [address|thread]
set -euo pipefail
src=$(realpath "$1") build=$(realpath "$2") san=${3:-}
root=$(mktemp -d /tmp/esmt-embedder-XXXXXX)
trap 'rm -rf "$root"' EXIT
stage=$(bash "$src/tests/install/stage_prefix.sh" "$build" "$root")
libdir=$(dirname "$(ls "$stage"/lib*/libesmtrain.so | head -1)")
backends=$(ls -d "$libdir"/esmtrain-*/backends | head -1)
cflags="-g${san:+ -fsanitize=$san -fno-omit-frame-pointer}"
programs="embedder/embedder_infer test_threads test_run_dir install/forced_cpu"

echo "== the embedder suite against $stage${san:+ (-fsanitize=$san)}"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
mkdir "$root/pc"
for p in $programs; do
  extra=()
  [ "$p" = install/forced_cpu ] || extra=("$src/tests/test_util.c" "$src/tests/cpu_dir_fixture.c")
  # shellcheck disable=SC2046,SC2086
  cc -std=c11 -Wall -Werror $cflags -I"$src/tests" "$src/tests/$p.c" "${extra[@]}" \
     $(pkg-config --cflags --libs esmtrain cmocka) -lm -pthread -Wl,-rpath,"$libdir" \
     -o "$root/pc/$(basename "$p")"
done
cmake -S "$src/tests/embedder" -B "$root/cmake" -DCMAKE_PREFIX_PATH="$stage" \
      -DESMT_TESTS="$src/tests" -DSANITIZE="$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/cmake" >/dev/null
bash "$src/tests/install/check_cxx_headers.sh" "$stage/include" "$root/headers"
# what the runs need from the source tree, copied before it is hidden
cp "$src/tests/install/check_embed_example.sh" "$src/tests/lsan.supp" "$root/"

cat > "$root/runs.sh" <<'RUNS'
set -euo pipefail
root=$1 stage=$2 libdir=$3 backends=$4 san=$5 cflags=$6
shift 6
for tree in "$@"; do # the trees hidden: nothing of them is left to find
  [ ! -e "$tree" ] || [ -z "$(ls -A "$tree")" ] || { echo "$tree is not hidden" >&2; exit 1; }
done
cli=$stage/bin/esmtrain-example
export ESMT_TEST_BACKEND_DIR=$backends ESMT_TEST_CLI=$cli
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=suppressions=$root/lsan.supp
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# under ThreadSanitizer, one CPU thread: libgomp's workers synchronise in
# uninstrumented code (test_threads' own threads are what is checked);
threads=0
[ "$san" != thread ] || { export ESMT_TEST_THREADS=1; threads=1; }
for p in embedder_infer test_threads test_run_dir; do
  for kind in pc cmake; do "$root/$kind/$p" >"$root/$p.$kind.log" 2>&1 ||
    { cat "$root/$p.$kind.log"; echo "$p ($kind) failed" >&2; exit 1; }
  done
  grep -h "PASSED\|skipped" "$root/$p.pc.log" | sed "s/^/$p: /"
done
# the CLI as the other holder of run.lock ran, not skipped
! grep -q skipped "$root/test_run_dir.pc.log" || { echo "test_run_dir skipped a case" >&2; exit 1; }
"$root/pc/forced_cpu" && "$root/cmake/forced_cpu" env
env -u ESMTRAIN_CONFIG_PATH "$cli" config --preset cpu > "$root/cpu.yaml"
grep -q backend "$root/cpu.yaml" || { echo "config --preset cpu printed nothing" >&2; exit 1; }
echo "presets: config --preset cpu found in the moved prefix"
awk 'BEGIN { srand(5); for (r = 0; r < 40; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 40);
  for (i = 0; i < n; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1));
  printf("\n") } }' > "$root/prot.fa"
"$cli" ingest "$root/prot.fa" -o "$root/data" --quiet >/dev/null
# a window of 64 residues: examples/embed.c's long protein (two windows and 17
# residues) stays quick under ThreadSanitizer
"$cli" train --data "$root/data" --out "$root/run" --layers 1 --width 16 --heads 2 --steps 2 \
  --warmup 1 --eval-every 0 --no-mfu --threads "$threads" --max-len 64 \
  --set model.max_positions=66 >/dev/null 2>&1 ||
  { echo "the installed CLI could not train the model the API is checked against" >&2; exit 1; }
# examples/embed.c's context takes every core, and OpenBLAS's own threads
# make it minutes long under ThreadSanitizer: its check (the API's score
# equal to the CLI's) runs on the other builds
if [ "$san" = thread ]; then
  echo "examples/embed.c: checked on the builds without ThreadSanitizer"
else
  CFLAGS=$cflags bash "$root/check_embed_example.sh" "$stage" "$libdir" "$root/run"
fi
RUNS

# the source and build trees hidden (the build tree first: it may lie in the source tree)
if unshare -rm true 2>/dev/null; then
  echo "runs with $build and $src hidden (an empty tmpfs over each)"
  # shellcheck disable=SC2016
  unshare -rm bash -c 'mount -t tmpfs none "$1"; mount -t tmpfs none "$2"; shift 2; exec "$@"' \
    _ "$build" "$src" bash "$root/runs.sh" "$root" "$stage" "$libdir" "$backends" "$san" "$cflags" \
    "$build" "$src"
elif command -v strace >/dev/null; then
  echo "runs traced: no file under $src or $build may be opened"
  strace -f -qq -e trace=%file -o "$root/files.trace" \
    bash "$root/runs.sh" "$root" "$stage" "$libdir" "$backends" "$san" "$cflags"
  if grep -E "\"($src|$build)/" "$root/files.trace" | grep -v 'ENOENT' | head -5 | grep .; then
    echo "the runs opened files of the source or build tree (above)" >&2; exit 1
  fi
else
  echo "warning: neither unshare nor strace: the source and build trees stay visible" >&2
  bash "$root/runs.sh" "$root" "$stage" "$libdir" "$backends" "$san" "$cflags"
fi
echo "embedder suite passed"
