#!/usr/bin/env bash
# sgrad-kge train under mpirun (tools/kge/dist.c): on a generated graph whose held-out
# triples are the inverses of training ones (learnable: one process reaches a filtered
# test MRR near 1), 2 ranks train a model file that loads and evaluates without MPI; its
# MRR is one process's within 0.05 and above 0.8 (a broken exchange of rows or relation
# gradients does not learn this graph); each rank holds half the entity rows; the vectors
# equal one process's up to float summation order (SGD: within 5e-6); 2 ranks stopped
# after a checkpoint and resumed end bitwise where an uninterrupted 2-rank run ends; a
# resume with 1 or 3 ranks from the 2-rank checkpoint, and with 2 from a one-process one,
# is refused before training, and eval of the 2-rank checkpoint says what it is; a
# diverged 2-rank run fails on every rank; ranks given different flags are refused on
# every rank.
# Skips (exit 77) when sgrad-kge is not built with MPI or there is no mpirun; a build
# without MPI is first checked to refuse a start as one of 2 processes.
set -euo pipefail
build=${1:-build}
prog=$build/sgrad-kge
# grep reads all of nm's output: with pipefail, grep -q quitting early fails the pipe (SIGPIPE)
if [ ! -x "$prog" ] || ! nm "$prog" 2>/dev/null | grep kge_dist_start >/dev/null; then
    if [ -x "$prog" ]; then
        rc=0
        msg=$(OMPI_COMM_WORLD_SIZE=2 "$prog" train -train /dev/null -output /dev/null 2>&1) || rc=$?
        if [ "$rc" != 2 ] || [[ "$msg" != *"this build has no MPI"* ]]; then
            echo "FAIL test_kge_mpi: a build without MPI started as 2 processes gave status $rc: $msg"
            exit 1
        fi
        echo "test_kge_mpi: a build without MPI refuses to run as 2 processes"
    fi
    echo "SKIP test_kge_mpi: $prog is not built with MPI here (SGRAD_BUILD_TOOLS=OFF or SGRAD_MPI=OFF)"
    exit 77
fi
if ! command -v mpirun >/dev/null || ! command -v python3 >/dev/null; then
    echo "SKIP test_kge_mpi: no mpirun (apt-get install openmpi-bin) or no python3"
    exit 77
fi
. "$(dirname "$0")/dist/mpi_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL test_kge_mpi: $*"; fail=1; }

# 300 entities, relations p0, p1 and their inverses q0, q1: each pair (a, b) gives
# (a p b) and (b q a); a tenth of the p triples are held out (valid, test), their q
# inverses stay in training
awk 'BEGIN { srand(11); for (i = 0; i < 1500; i++) { a = int(rand() * 300); b = int(rand() * 300);
       k = i % 20; f = k == 0 ? "valid" : k == 1 ? "test" : "train";
       printf "e%d\tp%d\te%d\n", a, i % 2, b > "'"$tmp"'/" f ".tsv";
       printf "e%d\tq%d\te%d\n", b, i % 2, a > "'"$tmp"'/train.tsv" } }'
data=(-train "$tmp/train.tsv" -valid "$tmp/valid.tsv" -test "$tmp/test.tsv")
flags=("${data[@]}" -model complex -dim 64 -epochs 40 -batch 256 -chunk 128 -negs 64 -reg-coef 0.01
       -threads 1 -progress 0)
mrr() { python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["mrr"])' "$1"; }

"$prog" train "${flags[@]}" -output "$tmp/one.kge" >"$tmp/one.out"
timeout 300 "${mpi[@]}" -np 2 "$prog" train "${flags[@]}" -progress 1 -output "$tmp/two.kge" \
    >"$tmp/two.out" 2>"$tmp/two.err" || { cat "$tmp/two.err"; bad "2 ranks failed"; }
"$prog" eval "$tmp/two.kge" -test "$tmp/test.tsv" -filter "$tmp/train.tsv,$tmp/valid.tsv,$tmp/test.tsv" \
    >"$tmp/two.eval" || bad "the 2-rank model does not evaluate"
one=$(mrr "$tmp/one.out") two=$(mrr "$tmp/two.out") two_eval=$(mrr "$tmp/two.eval")
echo "test_kge_mpi: filtered test MRR: 1 process $one, 2 ranks $two (eval of its file: $two_eval)"
python3 - "$one" "$two" "$two_eval" <<'PY' || bad "MRR: 1 process $one, 2 ranks $two, eval $two_eval"
import sys
one, two, ev = map(float, sys.argv[1:])
assert one > 0.8 and two > 0.8, (one, two)
assert abs(one - two) <= 0.05, (one, two)
assert abs(two - ev) < 1e-6, (two, ev)  # train's -test line ranks what the file holds
PY
# rank r holds rows [floor(r E / 2), floor((r + 1) E / 2)): 150 of 300 each
for r in 0 1; do
    grep -q "^sgrad-kge: rank $r of 2: entity rows \[$((r * 150)), $((r * 150 + 150))) of 300 (150 rows" \
        "$tmp/two.err" || { cat "$tmp/two.err"; bad "rank $r does not hold half the entity rows"; }
done
[ "$(grep -c ' edges/sec$' "$tmp/two.err")" = 1 ] || bad "not rank 0 alone printed the summary"

# the same terms, other float sums: with SGD (no Adagrad amplifying early rounding) the
# vectors of 1, 2 and 3 ranks agree within 5e-6 (measured: 5e-7); both sides ranked, and
# the chunk's own entities as negatives (each rank's slice masks its queries' own among
# the whole chunk's; a rank masking the wrong column was 6e-5 off)
sgd=("${data[@]}" -model distmult -reciprocal 0 -chunk-negs 1 -dim 16 -epochs 2 -batch 200 -chunk 64 -negs 32
     -optim sgd -lr 0.1 -loss softmax -init-scale 0.5 -threads 1 -progress 0)
"$prog" train "${sgd[@]}" -output "$tmp/s1.kge" >/dev/null
for np in 2 3; do
    timeout 300 "${mpi[@]}" -np $np "$prog" train "${sgd[@]}" -output "$tmp/s$np.kge" >/dev/null || bad "$np ranks failed"
done
for np in 1 2 3; do mkdir "$tmp/x$np" && "$prog" export "$tmp/s$np.kge" -output "$tmp/x$np"; done
python3 - "$tmp" <<'PY' || bad "1, 2 and 3 ranks' SGD vectors differ by more than float summation order"
import sys
def rows(d, f):
    return [[float(x) for x in l.split("\t", 1)[1].split()] for l in open(f"{d}/{f}.tsv")]
for np in (2, 3):
    for f in ("entities", "relations"):
        a, b = rows(sys.argv[1] + "/x1", f), rows(sys.argv[1] + f"/x{np}", f)
        d = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
        assert len(a) == len(b) and d <= 5e-6, (np, f, d)
PY

# checkpoint and resume at 2 ranks: stopped at step 10 with a checkpoint every 7 steps,
# resumed, the model is bitwise the uninterrupted run's
ck=(-epochs 3 -dim 16 -eval-every 1)
timeout 300 "${mpi[@]}" -np 2 "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/full.kge" \
    -checkpoint "$tmp/ckA" -save-every 7 >/dev/null || bad "2 ranks with -checkpoint failed"
rc=0
timeout 300 "${mpi[@]}" -np 2 "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/x.kge" -checkpoint "$tmp/ckB" \
    -save-every 7 -stop-after 10 >/dev/null 2>"$tmp/stop.err" || rc=$?
{ [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "stopped at step 10" "$tmp/stop.err"; } ||
    { cat "$tmp/stop.err"; bad "-stop-after 10 at 2 ranks: status $rc"; }
for f in ckB ckB.0-of-2 ckB.1-of-2; do [ -s "$tmp/$f" ] || bad "no checkpoint file $f"; done
timeout 300 "${mpi[@]}" -np 2 "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/res.kge" -resume "$tmp/ckB" \
    >/dev/null || bad "the 2-rank resume failed"
cmp "$tmp/full.kge" "$tmp/res.kge" || bad "2 ranks resumed differ from 2 ranks uninterrupted"

# the 2-rank checkpoint's own file holds no entity table: eval refuses it, saying why
rc=0
"$prog" eval "$tmp/ckB" -test "$tmp/test.tsv" >/dev/null 2>"$tmp/ck.err" || rc=$?
{ [ "$rc" = 2 ] && grep -q "is a checkpoint of a 2-rank run: resume it with mpirun -np 2" "$tmp/ck.err"; } ||
    { cat "$tmp/ck.err"; bad "eval of a 2-rank checkpoint: status $rc"; }

# a diverged 2-rank run (SGD at the largest -lr) fails on every rank, none left waiting
rc=0
timeout 120 "${mpi[@]}" -np 2 "$prog" train "${sgd[@]}" -lr 1000 -epochs 200 -output "$tmp/div.kge" \
    >/dev/null 2>"$tmp/div.err" || rc=$?
{ [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "training diverged at epoch" "$tmp/div.err" &&
  [ ! -e "$tmp/div.kge" ]; } || { cat "$tmp/div.err"; bad "a diverged 2-rank run: status $rc"; }

# resumes by another rank count are refused before training, naming both counts
refused() { # $1: what; $2: the message wanted; the rest: the command
    local what=$1 want=$2 rc=0
    shift 2
    timeout 120 "$@" >"$tmp/r.out" 2>&1 || rc=$?
    if [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q "$want" "$tmp/r.out" || [ -e "$tmp/y.kge" ]; then
        cat "$tmp/r.out"
        bad "$what: status $rc, wanted a refusal ($want) and no model"
    fi
}
refused "1 process from 2 ranks' checkpoint" "written by 2 ranks (mpirun -np 2), this run is one process" \
    "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/y.kge" -resume "$tmp/ckB"
refused "3 ranks from 2 ranks' checkpoint" "written by 2 ranks (mpirun -np 2), this run is 3 ranks" \
    "${mpi[@]}" -np 3 "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/y.kge" -resume "$tmp/ckB"
"$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/o.kge" -checkpoint "$tmp/ck1" >/dev/null
refused "2 ranks from one process's checkpoint" "written by one process, this run is 2 ranks" \
    "${mpi[@]}" -np 2 "$prog" train "${flags[@]}" "${ck[@]}" -output "$tmp/y.kge" -resume "$tmp/ck1"
# ranks given different flags (an MPMD job)
refused "ranks with different flags" "the ranks disagree on the command line" \
    "${mpi[@]}" -np 1 "$prog" train "${flags[@]}" -output "$tmp/y.kge" : \
    -np 1 "$prog" train "${flags[@]}" -output "$tmp/y.kge" -dim 32

[ "$fail" = 0 ] || exit 1
echo "test_kge_mpi: passed"
