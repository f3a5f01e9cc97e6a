#!/usr/bin/env bash
# sgrad-kge against the same model written in PyTorch (bench/kge_torch.py:
# nn.Embedding(sparse=True), the same chunked negatives, scores, loss, N3 term and
# optimizer), in turn (sgrad, torch, sgrad, torch, ...), at 1 and 2 threads, on the bundled
# WordNet graph (data/wordnet-kg): training edges/sec and the filtered test MRR after the
# same epochs.
#
# usage: bench/kge_compare.sh [BUILD_DIR]   (default: build)
#   env: MODELS="complex rotate"  THREADS="1 2"  ROUNDS=3  EPOCHS=1  MAX_EVAL=500
#        EDGES=N (train on the first N training edges only: for a peer too slow for a full
#        epoch; the rates stay comparable, the MRRs are then of a smaller graph)
#        FLAGS="..." (flags for sgrad-kge, e.g. "-dim 400 -chunk-negs 0"; the torch arm
#        takes every option from the model file sgrad-kge wrote)
# needs: /usr/bin/python3 with torch; run it with Debian's libopenblas0-pthread installed
# (PyTorch on the reference BLAS is not a peer anyone has); nothing else running.
#
# Output: one JSON line per run {"arm", "model", "threads", "round", "edges_per_s",
# "train_s", "mrr", ...} then, per model and thread count, a summary line with the median
# edges/sec of each arm, their ratio (sgrad / torch) and each arm's MRRs over the rounds.
# edges/sec is the training rate alone: sgrad's from its -log records (the epochs' edges
# over their elapsed time), torch's from its timed training loop; neither counts reading
# the files or the evaluation. Seeds differ per round (1, 2, 3, ...), so the MRRs show the
# seed spread. Both arms evaluate the first MAX_EVAL test triples (0: all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=(${MODELS:-complex rotate})
threads_list=(${THREADS:-1 2})
rounds=${ROUNDS:-3}
epochs=${EPOCHS:-1}
max_eval=${MAX_EVAL:-500}
edges=${EDGES:-0}
extra=(${FLAGS:-})
kge=$build/sgrad-kge
py=/usr/bin/python3
[ -x "$kge" ] || { echo "kge_compare: $kge not found; build first (make build)" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "kge_compare: $py cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for s in train valid test; do xz -dc "data/wordnet-kg/$s.tsv.xz" >"$work/$s.tsv"; done
if [ "$edges" -gt 0 ]; then
    head -n "$edges" "$work/train.tsv" >"$work/train_used.tsv"
else
    cp "$work/train.tsv" "$work/train_used.tsv"
fi
head -n "$([ "$max_eval" -gt 0 ] && echo "$max_eval" || wc -l <"$work/test.tsv")" "$work/test.tsv" >"$work/test_eval.tsv"
echo "== bundled WordNet graph: $(wc -l <"$work/train_used.tsv") training edges used; torch: $("$py" -c 'import torch; print(torch.__version__)')" >&2

# The options the last sgrad-kge run trained with (its model file's kge.* metadata), as
# flags for bench/kge_torch.py: the torch arm runs exactly what sgrad ran.
model_flags() {
    "$py" - "$work/model.st" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
flags = {k[len("kge.opt."):]: v for k, v in meta.items() if k.startswith("kge.opt.")}
flags.update({"model": meta["kge.model"], "dim": meta["kge.dim"],
              "reciprocal": meta["kge.reciprocal"], "margin": meta["kge.margin"]})
for k in ("seed", "epochs"):
    flags.pop(k, None)
print(" ".join(f"-{k} {v}" for k, v in sorted(flags.items())))
EOF
}

run_sgrad() { # model threads seed
    local log=$work/sgrad.log
    rm -f "$log"
    "$kge" train -train "$work/train_used.tsv" -valid "$work/valid.tsv" -test "$work/test.tsv" -model "$1" -epochs "$epochs" \
        -threads "$2" -seed "$3" -progress 0 -output "$work/model.st" -log "$log" "${extra[@]}" >/dev/null
    local metrics
    metrics=$("$kge" eval "$work/model.st" -test "$work/test_eval.tsv" \
        -filter "$work/train_used.tsv,$work/valid.tsv,$work/test.tsv")
    "$py" - "$log" "$metrics" "$1" "$2" "$3" "$epochs" <<'EOF'
import json, sys
log, metrics, model, threads, seed, epochs = sys.argv[1:]
recs = [json.loads(l) for l in open(log) if '"epoch"' in l]
train_s = recs[-1]["elapsed_s"]
edges = sum(r["edges_per_sec"] * (r["elapsed_s"] - (recs[i - 1]["elapsed_s"] if i else 0))
            for i, r in enumerate(recs))
print(json.dumps({"arm": "sgrad", "model": model, "threads": int(threads), "round": int(seed),
                  "epochs": int(epochs), "train_s": train_s, "edges_per_s": round(edges / train_s, 1),
                  **json.loads(metrics)}))
EOF
}

run_torch() { # model threads seed
    "$py" bench/kge_torch.py -train "$work/train_used.tsv" -valid "$work/valid.tsv" -test "$work/test.tsv" \
        -max-eval "$max_eval" -model "$1" -epochs "$epochs" -threads "$2" -seed "$3" \
        $(model_flags) | "$py" -c '
import json, sys
r = json.loads(sys.stdin.read()); r["round"] = int(sys.argv[1]); print(json.dumps(r))' "$3"
}

results=$work/results.jsonl
for model in "${models[@]}"; do
    for threads in "${threads_list[@]}"; do
        for round in $(seq 1 "$rounds"); do
            run_sgrad "$model" "$threads" "$round" | tee -a "$results"
            run_torch "$model" "$threads" "$round" | tee -a "$results"
        done
    done
done
"$py" - "$results" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in sorted({(r["model"], r["threads"]) for r in rows}):
    arm = {a: [r for r in rows if (r["model"], r["threads"]) == key and r["arm"] == a] for a in ("sgrad", "torch")}
    med = {a: statistics.median(r["edges_per_s"] for r in rs) for a, rs in arm.items()}
    print(json.dumps({"summary": key[0], "threads": key[1],
                      "sgrad_edges_per_s": med["sgrad"], "torch_edges_per_s": med["torch"],
                      "ratio": round(med["sgrad"] / med["torch"], 2),
                      "sgrad_mrr": [round(r["mrr"], 4) for r in arm["sgrad"]],
                      "torch_mrr": [round(r["mrr"], 4) for r in arm["torch"]]}))
EOF
