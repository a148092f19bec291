#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CPU data-parallel transports side by side in one run (issue #23):
#  1. all-reduce of a 30 MB fp32 bucket over the TCP ring and over MPI,
#     both started by mpirun (bench_comm; ESMTRAIN_COMM picks the transport);
#  2. esm2_t6_8M trained by 2 ranks: `launch -n 2` (TCP ring) against
#     `mpirun -np 2` (MPI), the median step time of updates 3.. of each,
#     on UniProt proteins (MMseqs2's example database).
# Prints each figure and the MPI/TCP ratios. Needs a build with the MPI
# plugin (libopenmpi-dev at configure time) and openmpi-bin.
# Usage: bench_comm.sh [BUILD_DIR] [STEPS]   (defaults build-nocuda, 10)
set -euo pipefail
build=${1:-build-nocuda}
steps=${2:-10}
cli=$build/bin/esmtrain-example
bench=$build/bin/bench_comm
# bench_comm links the static archive: name the plugin (the CLI finds it next to libesmtrain.so)
plugin=$(realpath "$build/lib/esmtrain/comm/mpi_comm.so")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
work=$(mktemp -d /tmp/esmt-bench-comm-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(mpirun --version | head -1)"

echo "== 30 MB all-reduce, 2 ranks, 20 rounds each"
mpirun -np 2 --bind-to none -x ESMTRAIN_COMM=tcp -x ESMTRAIN_RENDEZVOUS_FILE="$work/rdv" \
  "$bench" --mb 30 --iters 20 | tee "$work/bw-tcp"
mpirun -np 2 --bind-to none -x ESMTRAIN_COMM=mpi -x ESMTRAIN_COMM_PLUGIN="$plugin" "$bench" --mb 30 --iters 20 | tee "$work/bw-mpi"
ms() { sed 's/.*median \([0-9.]*\) ms.*/\1/' "$1"; }
awk -v t="$(ms "$work/bw-tcp")" -v m="$(ms "$work/bw-mpi")" \
  'BEGIN { printf("all-reduce time MPI / TCP: %.2f (below 1: MPI faster)\n", m / t) }'

echo "== esm2_t6_8M, 2 ranks x 1 thread, $steps updates each"
"$cli" ingest /usr/share/doc/mmseqs2/example-data/DB.fasta.gz -o "$work/data" --valid-fraction 0.02 \
  --quiet > /dev/null
args=(--data "$work/data" --preset esm2_t6_8M --max-len 256 --batch-tokens 4096 --steps "$steps"
      --warmup 2 --eval-every 0 --log-every 1 --no-mfu --set backend.threads=1)
"$cli" launch -n 2 train "${args[@]}" --out "$work/tcp" > "$work/tcp.log" 2>&1 \
  || { cat "$work/tcp.log"; exit 1; }
mpirun -np 2 --bind-to none "$cli" train "${args[@]}" --out "$work/mpi" > "$work/mpi.log" 2>&1 \
  || { cat "$work/mpi.log"; exit 1; }
for r in tcp mpi; do grep -o "[0-9]* ranks, gradients [^;]*" "$work/$r.log" | sed "s/^/  $r: /"; done
median_step() { # metrics.jsonl: median step_ms of the train lines from update 3 on
  grep '"kind":"train"' "$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*"step_ms":\([0-9.]*\).*/\1 \2/' \
    | awk '$1 >= 3 { print $2 }' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
t=$(median_step "$work/tcp")
m=$(median_step "$work/mpi")
cmp -s "$work/tcp/checkpoints/step-$(printf %08d "$steps")/model.safetensors" \
       "$work/mpi/checkpoints/step-$(printf %08d "$steps")/model.safetensors" \
  && same="the same weights, bit for bit" || same="DIFFERENT weights"
echo "step time: TCP ring (launch -n 2) ${t} ms, MPI (mpirun -np 2) ${m} ms; MPI / TCP $(awk -v a="$m" -v b="$t" 'BEGIN { printf("%.2f", a / b) }'); $same"
/usr/bin/python3 "$(dirname "$0")/record.py" host_comm --config "2 ranks: 30 MB all-reduce; esm2_t6_8M, $steps updates" \
  --command "bash bench/bench_comm.sh $build $steps" \
  --figure "allreduce_ms=$(ms "$work/bw-mpi"):ms" --figure "step_ms=$m:ms" \
  --peer "the core's TCP ring" --peer-figure "allreduce_ms=$(ms "$work/bw-tcp"):ms" --peer-figure "step_ms=$t:ms" \
  --ratio "step_ms=$(awk -v a="$m" -v b="$t" 'BEGIN { print a / b }'):MPI / TCP (below 1: MPI faster)"
