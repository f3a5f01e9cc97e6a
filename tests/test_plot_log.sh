#!/usr/bin/env bash
# tools/plot_log.py draws a -log file of sgrad-w2v: the SVG parses as XML, its loss line
# has one point per record with a loss, higher losses are drawn higher (smaller y) and the
# words axis runs left to right. Skips (exit 77) without the program or python3.
# usage: tests/test_plot_log.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ] || [ ! -x /usr/bin/python3 ]; then
    echo "SKIP test_plot_log: needs $w2v (SGRAD_BUILD_TOOLS=ON) and /usr/bin/python3"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
xz -dc data/demo-corpus.txt.xz | head -c 400000 >"$tmp/c.txt"
"$w2v" -train "$tmp/c.txt" -output "$tmp/v.txt" -cbow 0 -size 8 -iter 2 -min-count 3 -threads 1 \
    -log "$tmp/log.jsonl" 2>/dev/null || { echo "FAIL: training"; exit 1; }
/usr/bin/python3 tools/plot_log.py "$tmp/log.jsonl" "$tmp/p.svg" "a & b <test>" || { echo "FAIL: plot"; exit 1; }
/usr/bin/python3 - "$tmp/log.jsonl" "$tmp/p.svg" <<'PY'
import json, sys, xml.dom.minidom
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["loss"] is not None]
doc = xml.dom.minidom.parse(sys.argv[2])
lines = {p.getAttribute("id"): p for p in doc.getElementsByTagName("polyline")}
pts = [tuple(map(float, p.split(","))) for p in lines["loss"].getAttribute("points").split()]
ok = len(pts) == len(recs) and len(recs) > 50
ok = ok and all(a[0] <= b[0] for a, b in zip(pts, pts[1:]))  # words: left to right
pairs = list(zip(recs, pts))
ok = ok and all((r1["loss"] - r2["loss"]) * (p2[1] - p1[1]) >= 0 for (r1, p1), (r2, p2) in zip(pairs, pairs[1:]))
ok = ok and "a &amp; b &lt;test>" in open(sys.argv[2]).read()
print("plot_log: %d records, %d points: %s" % (len(recs), len(pts), "ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
