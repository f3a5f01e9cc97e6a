#!/usr/bin/env bash
# bench/w2v_scale.sh end to end on two tiny vocabularies: every JSON line parses and has
# the fields, with rates that agree with its seconds; every installed tool ran at every
# size and thread count; and the generator's corpora are what was asked, counted here
# independently: the tokens, the words surviving min-count 5 (also as sgrad-w2v counts
# them), the same file for the same seed and another for another seed, and its pairs
# estimate within 10% of the examples sgrad-w2v trained on; two rounds, one run of each
# tool at each point in each. Skips (77) without a python3 that has numpy, or without
# sgrad-w2v (SGRAD_BUILD_TOOLS=OFF).
# usage: tests/test_w2v_scale_smoke.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
py=
for c in /usr/bin/python3 python3; do
    if "$c" -c 'import numpy' 2>/dev/null; then py=$c; break; fi
done
if [ -z "$py" ]; then
    echo "SKIP test_w2v_scale_smoke: no python3 with numpy (apt-get install python3-numpy)"
    exit 77
fi
if [ ! -x "$build/sgrad-w2v" ]; then
    echo "SKIP test_w2v_scale_smoke: $build/sgrad-w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# word2vec.c only when installed: the script would otherwise fetch its source, and a test
# must not need the network
tools="sgrad fastText gensim"
command -v word2vec >/dev/null && tools+=" word2vec"
VOCABS="300 2000" TOKENS_PER_WORD=40 THREADS="1 2" EPOCHS=2 REPS=2 TOOLS=$tools OUT=$tmp PYTHON=$py \
    bash bench/w2v_scale.sh "$build" >"$tmp/stdout" 2>"$tmp/stderr" || {
    cat "$tmp/stderr"
    exit 1
}
expect=(sgrad)
command -v fasttext >/dev/null && expect+=(fastText)
"$py" -c 'import gensim' 2>/dev/null && expect+=(gensim)
command -v word2vec >/dev/null && expect+=(word2vec)

"$py" bench/zipf_corpus.py --vocab 300 --tokens 12000 --seed 1 --out "$tmp/again.txt" >/dev/null
"$py" bench/zipf_corpus.py --vocab 300 --tokens 12000 --seed 2 --out "$tmp/other.txt" >/dev/null
cmp -s "$tmp/zipf-300.txt" "$tmp/again.txt" || { echo "FAIL: the same seed gave another corpus"; exit 1; }
if cmp -s "$tmp/zipf-300.txt" "$tmp/other.txt"; then echo "FAIL: another seed gave the same corpus"; exit 1; fi

"$py" - "$tmp" "${expect[*]}" <<'EOF'
import collections, json, re, sys
tmp, expect = sys.argv[1], sys.argv[2].split()
fails = 0
def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL: " + what)
rows = [json.loads(l) for l in open(tmp + "/results.jsonl")]
stdout_json = [json.loads(l) for l in open(tmp + "/stdout") if l.startswith("{")]
check(rows == stdout_json, "the printed JSON lines differ from results.jsonl")
fields = ("tool", "vocab", "threads", "round", "words", "epochs", "seconds",
          "words_per_sec_per_thread", "pairs_per_sec", "peak_rss_kb")
for r in rows:
    for k in fields:
        check(k in r, "no field %s in %s" % (k, r))
    if r.get("seconds", 0) > 0:
        wps = r["words"] * r["epochs"] / r["seconds"] / r["threads"]
        check(abs(wps - r["words_per_sec_per_thread"]) <= 1 + 1e-3 * wps, "words/s/thread of %s" % r)
        check(r["pairs_per_sec"] > 0, "pairs_per_sec of %s" % r)
    else:
        check(False, "seconds of %s" % r)
runs = collections.Counter((r["tool"], r["vocab"], r["threads"], r.get("round")) for r in rows)
for tool in expect:
    for V in (300, 2000):
        for th in (1, 2):
            for rnd in (1, 2):
                n = runs[(tool, V, th, rnd)]
                check(n == 1, "%s, vocab %d, %d threads, round %d: %d runs" % (tool, V, th, rnd, n))
check(len(rows) == 2 * 2 * 2 * len(expect), "%d runs, not one per tool, size, thread count and round" % len(rows))
check("medians of 2 round(s)" in open(tmp + "/stdout").read(), "the table does not say it holds medians")
for V in (300, 2000):
    counts = collections.Counter(open("%s/zipf-%d.txt" % (tmp, V)).read().split())
    meta = json.load(open("%s/zipf-%d.json" % (tmp, V)))
    check(sum(counts.values()) == 40 * V, "vocab %d: %d tokens, not %d" % (V, sum(counts.values()), 40 * V))
    check(sum(c >= 5 for c in counts.values()) == V, "vocab %d: %d words with count >= 5" % (V, sum(c >= 5 for c in counts.values())))
    check(any(c < 5 for c in counts.values()), "vocab %d: no word under min-count" % V)
    check(meta["vocab"] == V and meta["tokens"] == 40 * V, "vocab %d: metadata %s" % (V, meta))
log = open(tmp + "/sgrad.log").read().replace("\r", "\n")  # the last run: vocab 2000, 2 threads
m = re.search(r"(\d+) steps of (\d+) examples", log)
check(m is not None and "wrote 2000 x 100 word vectors" in log, "sgrad-w2v's log: " + log[-300:])
if m:
    examples = int(m.group(1)) * int(m.group(2)) / 2  # per epoch
    pairs = json.load(open(tmp + "/zipf-2000.json"))["pairs_per_epoch"]
    check(abs(examples - pairs) < 0.1 * pairs, "sgrad-w2v trained on %d pairs an epoch, the estimate is %d" % (examples, pairs))
try:
    import matplotlib  # noqa: F401
    import os
    check(os.path.getsize(tmp + "/w2v_scale.svg") > 0, "no plot")
except ImportError:
    pass
print("%d runs of %s checked" % (len(rows), ", ".join(expect)))
sys.exit(1 if fails else 0)
EOF
echo "1 passed, 0 failed"
