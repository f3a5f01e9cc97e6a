#!/usr/bin/env bash
# sg_dist under mpirun on loopback: tests/dist/test_dist.c (gradient exchange) and
# tests/dist/test_dist_table.c (sharded tables) with 2 ranks and with 4 (oversubscribed
# on a 2-core machine), then a job whose rank 1 kills itself mid-run (SIGKILL): under a
# plain mpirun the job must end with a non-zero status within a timeout (Open MPI 4 kills
# the survivors itself); under `mpirun --enable-recovery`, which leaves them running, each
# survivor must print its own error from the module's deadline (SGRAD_DIST_TIMEOUT=2) and
# exit 1, well within the timeout.
# Skips (exit 77) when the build has no MPI module (SGRAD_MPI off: no libopenmpi-dev).
set -euo pipefail
build=${1:-build}
bin=$build/tests/test_dist
if [ ! -x "$bin" ]; then
    echo "SKIP test_dist: this build has no MPI module (SGRAD_MPI=OFF; apt-get install libopenmpi-dev openmpi-bin)"
    exit 77
fi
if ! command -v mpirun >/dev/null; then
    echo "SKIP test_dist: no mpirun (apt-get install openmpi-bin)"
    exit 77
fi
. "$(dirname "$0")/dist/mpi_env.sh"
for np in 2 4; do
    for prog in "$bin" "$build/tests/test_dist_table"; do
        timeout 300 "${mpi[@]}" -np "$np" "$prog"
    done
done
# A sharded table's checkpoint resumed by a fresh job: 2 ranks train and save, then a
# new job of 2 loads, trains on and compares with an uninterrupted run.
ckdir=$(mktemp -d)
trap 'rm -rf "$ckdir"' EXIT
timeout 120 "${mpi[@]}" -np 2 "$build/tests/test_dist_table" save "$ckdir"
timeout 120 "${mpi[@]}" -np 2 "$build/tests/test_dist_table" resume "$ckdir"
# sgrad-bench dist at tiny sizes on 2 ranks: one JSON line per case with the fields it
# promises; the sparse exchange chosen and sending fewer bytes than the dense one would;
# a shard (and its state) taking about half the whole table's memory.
if [ -x "$build/sgrad-bench" ]; then
    out=$(timeout 120 "${mpi[@]}" -np 2 "$build/sgrad-bench" --quick dist)
    python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
assert [o["case"] for o in lines] == ["embedding_step", "sharded_step"], lines
o, t = lines
for k in ("bench", "case", "params", "ms", "ref_ms", "ratio", "threads", "bytes_sent_rank0",
          "bytes_dense_alternative_rank0", "rule_sparse_bytes", "rule_dense_bytes", "choice"):
    assert k in o, f"no field {k}: {o}"
assert o["bench"] == "dist" and o["params"]["ranks"] == 2 and o["ms"] > 0, o
assert o["choice"] == "sparse" and 0 < o["bytes_sent_rank0"] < o["bytes_dense_alternative_rank0"], o
for k in ("table_bytes_rank0", "table_bytes_max_rank", "table_bytes_unsharded", "bytes_lookup_rank0",
          "bytes_backward_rank0", "rows_served_rank0"):
    assert k in t, f"no field {k}: {t}"
share = t["table_bytes_max_rank"] / t["table_bytes_unsharded"]
assert t["ms"] > 0 and 0.45 < share < 0.55, (share, t)
# rank 0 sends the gradient rows of the indices rank 1 owns: about half of B = 100, D = 8 f32
assert 0 < t["bytes_backward_rank0"] < 100 * 8 * 4, t
PY
    echo "test_dist: sgrad-bench --quick dist ran on 2 ranks"
fi
# The cost model's probe: one line per message size, times positive and ordered as sizes.
if [ -x "$build/sgrad-mpi-probe" ]; then
    out=$(timeout 120 "${mpi[@]}" -np 2 "$build/sgrad-mpi-probe" --quick)
    python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
assert [o["bytes"] for o in lines] == [8, 64, 512, 4096, 1 << 20], lines
assert all(0 < o["one_way_us_min"] <= o["one_way_us"] <= o["one_way_us_max"] for o in lines), lines
assert lines[-1]["one_way_us"] > lines[0]["one_way_us"], lines
PY
    echo "test_dist: sgrad-mpi-probe --quick ran on 2 ranks"
fi
status=0
start=$(date +%s)
timeout 60 "${mpi[@]}" -np 3 "$bin" die >/dev/null 2>&1 || status=$?
took=$(( $(date +%s) - start ))
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    echo "test_dist: a job with a dead rank ended with status $status after ${took} s (wanted an error before the 60 s timeout)"
    exit 1
fi
echo "test_dist: a dead rank ended the job with status $status after ${took} s"
# With --enable-recovery mpirun's own status is 0 whatever the ranks return, so each rank
# runs under a shell that prints its exit status. The survivors end without MPI_Finalize
# (it would wait for the dead rank), so Open MPI's memory is still held: no leak check.
log=$ckdir/die.txt
status=0
start=$(date +%s)
SGRAD_DIST_TIMEOUT=2 ASAN_OPTIONS=detect_leaks=0 timeout 60 "${mpi[@]}" --enable-recovery \
    -x SGRAD_DIST_TIMEOUT -x ASAN_OPTIONS -np 3 \
    bash -c '"$0" die; echo "rank $OMPI_COMM_WORLD_RANK exited $?"' "$bin" >"$log" 2>&1 || status=$?
took=$(( $(date +%s) - start ))
ok=1
[ "$status" -ne 124 ] || ok=0
grep -q '^rank 1 exited 137$' "$log" || ok=0
for r in 0 2; do
    grep -q "^rank $r: .*sg_dist_reduce_grads: rank $r of 3: no answer from the other ranks within 2 s in MPI_" "$log" || ok=0
    grep -q "^rank $r exited 1$" "$log" || ok=0
done
if [ "$ok" -ne 1 ]; then
    echo "test_dist: under --enable-recovery, after ${took} s (status $status), wanted rank 1 killed and ranks 0 and 2 each"
    echo "reporting the timeout and exiting 1:"
    cat "$log"
    exit 1
fi
echo "test_dist: under --enable-recovery each survivor reported the dead rank itself and exited 1, after ${took} s"
echo "1 passed, 0 failed"
