#!/usr/bin/env bash
# sgrad-w2v -classes against an independent k-means in numpy (float64) written from
# word2vec.c's description: start in class i % K, 10 iterations of centroid = sum /
# (members + 1) scaled to unit length, each word to the class of the largest dot product
# (the first on a tie; an all-zero centroid never chosen). The vectors come from a run
# without -classes and the same seed (training does not depend on -classes), written in
# the binary format so that numpy sees the exact floats. Skips (exit 77) when python3 or
# numpy is missing (apt-get install python3-numpy) or the build has no programs.
# usage: tests/test_w2v_classes_numpy.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
py=/usr/bin/python3
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_classes_numpy: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP test_w2v_classes_numpy: python3 with numpy is not installed (apt-get install python3-numpy)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc data/demo-corpus.txt.xz | head -c 400000 >"$tmp/c.txt"
flags=(-train "$tmp/c.txt" -cbow 0 -size 12 -iter 1 -min-count 3 -seed 4 -threads 2 -debug 0)
"$w2v" "${flags[@]}" -binary 1 -output "$tmp/v.bin" || { echo "FAIL: the vectors run"; exit 1; }
for K in 1 7 40; do
    "$w2v" "${flags[@]}" -classes $K -output "$tmp/k$K.txt" || { echo "FAIL: the -classes $K run"; exit 1; }
done
"$py" - "$tmp" <<'PY'
import sys
import numpy as np

tmp = sys.argv[1]
with open(f"{tmp}/v.bin", "rb") as f:
    V, D = map(int, f.readline().split())
    words, rows = [], []
    for _ in range(V):
        w = b""
        while (c := f.read(1)) != b" ":
            w += c
        words.append(w.decode())
        rows.append(np.frombuffer(f.read(4 * D), dtype="<f4"))
        if f.peek(1)[:1] == b"\n":
            f.read(1)
vec = np.array(rows, dtype=np.float64)

def kmeans(K, iters=10):
    cl = np.arange(V) % K
    for _ in range(iters):
        cent = np.zeros((K, D))
        np.add.at(cent, cl, vec)
        cent /= (np.bincount(cl, minlength=K) + 1)[:, None]
        norm = np.linalg.norm(cent, axis=1)
        usable = norm > 0
        cent[usable] /= norm[usable, None]
        score = vec @ cent.T
        score[:, ~usable] = -np.inf
        cl = np.argmax(score, axis=1)
    return cl

fail = 0
for K in (1, 7, 40):
    got = [line.split() for line in open(f"{tmp}/k{K}.txt")]
    want = kmeans(K)
    if [g[0] for g in got] != words:
        print(f"FAIL: K={K}: the classes file's words are not the vectors file's")
        fail = 1
        continue
    diff = [i for i in range(V) if int(got[i][1]) != want[i]]
    # a word whose two best scores tie to rounding may go either way; none should here
    if diff:
        print(f"FAIL: K={K}: {len(diff)} of {V} words in another class than numpy's, e.g. "
              f"{words[diff[0]]}: {got[diff[0]][1]} vs {want[diff[0]]}")
        fail = 1
    else:
        print(f"ok K={K}: {V} words, {len(set(want))} classes used, as numpy")
sys.exit(fail)
PY
