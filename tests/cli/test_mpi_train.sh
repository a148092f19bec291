#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Data parallel on the CPU backend under mpirun (issue #23): the MPI plugin
# carries the collectives and training equals the TCP ring's bit for bit.
#  - mpirun -np 2 and -np 3 (oversubscribed: shared memory) write the same
#    checkpoint (weights and AdamW moments) as `launch -n 2/3` over TCP, and
#    the log says which transport ran;
#  - with dist.zero 1 (ZeRO-1) the same;
#  - ESMTRAIN_COMM=tcp under mpirun takes the TCP ring (rendezvous file);
#  - a rank killed mid-run stops the job with a message naming it, no hang.
# Usage: test_mpi_train.sh CLI PLUGIN   (exit 77 = skipped: no mpirun/plugin)
set -euo pipefail
cli=$1
plugin=$2
if ! command -v mpirun >/dev/null; then echo "skipped: mpirun not found (apt install openmpi-bin)"; exit 77; fi
if [ ! -f "$plugin" ]; then echo "skipped: the MPI plugin $plugin was not built (no MPI at build time)"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --bind-to none)
work=$(mktemp -d /tmp/esmt-mpi-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(23); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 600; r++) { printf(">p%d\n", r); n = 40 + int(rand() * 100);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 1024
        --warmup 2 --eval-every 4 --log-every 1 --no-mfu --set backend.threads=1)
six=(--steps 6)

same_checkpoint() { # run dirs a, b: weights and moments equal bit for bit
  for f in model optimizer; do
    cmp "$1/checkpoints/step-00000006/$f.safetensors" "$2/checkpoints/step-00000006/$f.safetensors" \
      || { echo "$f differs between $1 and $2"; exit 1; }
  done
}

for n in 2 3; do
  for z in 0 1; do
    echo "== $n ranks, dist.zero $z: mpirun equals launch (TCP) bit for bit"
    "$cli" launch -n $n train "${common[@]}" "${six[@]}" --set dist.zero=$z --out "$work/tcp$n-$z" \
      > "$work/tcp$n-$z.log" 2>&1 || { cat "$work/tcp$n-$z.log"; exit 1; }
    "${mpi[@]}" -np $n "$cli" train "${common[@]}" "${six[@]}" --set dist.zero=$z --out "$work/mpi$n-$z" \
      > "$work/mpi$n-$z.log" 2>&1 || { cat "$work/mpi$n-$z.log"; exit 1; }
    grep -q "); $n ranks, gradients .* over MPI (Open MPI" "$work/mpi$n-$z.log" \
      || { echo "the mpirun run did not use MPI"; cat "$work/mpi$n-$z.log"; exit 1; }
    grep -q "); $n ranks, gradients .* over TCP ring" "$work/tcp$n-$z.log" \
      || { echo "launch did not use TCP"; cat "$work/tcp$n-$z.log"; exit 1; }
    [ "$(grep -c 'step 6/6' "$work/mpi$n-$z.log")" -eq 1 ] || { echo "not only rank 0 printed"; exit 1; }
    same_checkpoint "$work/tcp$n-$z" "$work/mpi$n-$z"
  done
done

echo "== ESMTRAIN_COMM=tcp under mpirun: the TCP ring (rendezvous file)"
"${mpi[@]}" -np 2 -x ESMTRAIN_COMM=tcp -x ESMTRAIN_RENDEZVOUS_FILE="$work/rdv" "$cli" train \
  "${common[@]}" "${six[@]}" --out "$work/forced-tcp" > "$work/forced-tcp.log" 2>&1 \
  || { cat "$work/forced-tcp.log"; exit 1; }
grep -q "over TCP ring" "$work/forced-tcp.log" || { cat "$work/forced-tcp.log"; exit 1; }
same_checkpoint "$work/tcp2-0" "$work/forced-tcp"

echo "== ESMTRAIN_COMM=mpi with a missing plugin: a clear error"
set +e
ESMTRAIN_COMM_PLUGIN=/nonexistent/mpi_comm.so "${mpi[@]}" -np 2 -x ESMTRAIN_COMM=mpi \
  -x ESMTRAIN_COMM_PLUGIN "$cli" train "${common[@]}" "${six[@]}" --out "$work/noplugin" > "$work/noplugin.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "a missing plugin was not refused"; exit 1; }
grep -q "data parallel over MPI: the MPI plugin is not installed (looked for /nonexistent/mpi_comm.so" \
  "$work/noplugin.log" || { cat "$work/noplugin.log"; exit 1; }

echo "== rank 1 killed under mpirun: the job stops naming it"
"${mpi[@]}" -np 2 "$cli" train "${common[@]}" --steps 100000 --save-every 5 \
  --out "$work/kill" > "$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -f "$work/kill/checkpoints/latest" ] && break; sleep 0.05; done
victim=
for c in $(pgrep -f "$work/kill" || true); do
  if tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$c; fi
done
[ -n "$victim" ] || { echo "rank 1 not found"; cat "$work/kill.log"; exit 1; }
kill -KILL "$victim"
start=$(date +%s)
set +e; wait "$pid"; rc=$?; set -e
took=$(( $(date +%s) - start ))
tail -6 "$work/kill.log"
[ "$rc" -ne 0 ] || { echo "mpirun exited 0 after a rank was killed"; exit 1; }
grep -q "process rank 1 .* exited on signal 9" "$work/kill.log" || { cat "$work/kill.log"; exit 1; }
[ "$took" -lt 60 ] || { echo "took ${took}s to stop"; exit 1; }
[ -f "$work/kill/checkpoints/latest" ]
echo "mpi train ok"
