#!/usr/bin/env bash
# sgrad-w2v -evaluate against gensim's KeyedVectors.evaluate_word_analogies (3CosAdd,
# case_insensitive=True, restrict_vocab = -restrict) on a crafted vectors file and
# questions file: words in several cases (a word's first row stands for its variants),
# a line over 1023 bytes, words over 255 bytes, 70 sections, lines of 3 and 5 words
# (skipped by both), blank lines, unknown words. Every section's covered and correct
# counts and the totals must agree (-restrict 20 leaves some questions uncovered). A
# questions path that cannot be read (a directory) is an error (status 1), not an empty
# file. Skips (exit 77) when python3-gensim or the programs are missing.
# usage: tests/test_w2v_evaluate_gensim.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import gensim' 2>/dev/null; then
    echo "SKIP test_w2v_evaluate_gensim: python3-gensim is not installed (apt-get install python3-gensim)"
    exit 77
fi
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_evaluate_gensim: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$py" - "$tmp" <<'EOF'
import random, sys
import numpy as np
tmp = sys.argv[1]
rng = random.Random(3)
nrs = np.random.default_rng(3)
D = 16
# pairs (country, capital): capital = country + a shared offset + noise
countries = ["Country%d" % i for i in range(12)]
capitals = ["Capital%d" % i for i in range(12)]
longw = "L" * 300  # a word past 255 bytes: one more pair
countries.append(longw + "country")
capitals.append(longw + "capital")
offset = nrs.normal(size=D) * 2
vec = {}
for c, k in zip(countries, capitals):
    base = nrs.normal(size=D)
    vec[c] = base
    vec[k] = base + offset + nrs.normal(size=D) * 0.3
words = countries + capitals
rng.shuffle(words)
# case variants after the originals, with vectors of their own
variants = []
for w in words[:10]:
    for v in (w.upper(), w.lower()):
        if v != w and v not in vec:
            vec[v] = nrs.normal(size=D)
            variants.append(v)
words += variants + ["filler%d" % i for i in range(10)]
for w in words:
    if w not in vec: vec[w] = nrs.normal(size=D)
with open(tmp + "/v.txt", "w") as f:
    f.write("%d %d\n" % (len(words), D))
    for w in words:
        f.write(w + " " + " ".join("%.6f" % x for x in vec[w]) + "\n")
def case(w):
    return rng.choice([w, w.upper(), w.lower()])
with open(tmp + "/q.txt", "w") as f:
    n = len(countries)
    for s in range(70):
        f.write(": sec%d\n" % s)
        for _ in range(3):
            i, j = rng.sample(range(n), 2)
            f.write(" ".join(case(w) for w in (countries[i], capitals[i], countries[j], capitals[j])) + "\n")
        i, j = rng.sample(range(n), 2)
        f.write(" ".join(case(w) for w in (capitals[i], countries[i], capitals[j], countries[j])) + "\n")
        if s % 7 == 0:
            f.write("\n")
            f.write("%s %s %s\n" % (countries[0], capitals[0], countries[1]))
            f.write("%s %s %s %s %s\n" % (countries[0], capitals[0], countries[1], capitals[1], countries[2]))
            f.write("%s %s %s nosuchword\n" % (countries[0], capitals[0], countries[1]))
        if s % 10 == 0:  # one line over 1023 bytes
            f.write("%s %s %s%s%s\n" % (countries[2], capitals[2], countries[3], " " * 1100, capitals[3]))
        if s % 9 == 0:
            f.write("%s %s %s %s\n" % (countries[-1], capitals[-1], countries[4], capitals[4]))
EOF

check() { # restrict
    local rc=0
    "$w2v" -evaluate "$tmp/v.txt" -questions "$tmp/q.txt" -restrict "$1" >"$tmp/ours.txt" 2>"$tmp/err.txt" ||
        { echo "FAIL: -evaluate -restrict $1 exited $?:"; cat "$tmp/err.txt"; rc=1; }
    grep -q "skipped 20 lines that are not 4 words (the first: line 7)" "$tmp/err.txt" || {
        echo "FAIL: stderr does not report the 20 skipped lines:"; cat "$tmp/err.txt"; rc=1; }
    "$py" - "$tmp" "$1" <<'EOF' || rc=1
import logging, re, sys
from gensim.models import KeyedVectors
tmp, R = sys.argv[1], int(sys.argv[2])
kv = KeyedVectors.load_word2vec_format(tmp + "/v.txt")
score, sections = kv.evaluate_word_analogies(tmp + "/q.txt", restrict_vocab=R, case_insensitive=True)
theirs = [(s["section"], len(s["correct"]) + len(s["incorrect"]), len(s["correct"])) for s in sections[:-1]]
total = sections[-1]
ours, summary = [], None
for line in open(tmp + "/ours.txt"):
    m = re.match(r"^  (\S+)\s+(\d+) /\s+(\d+) covered, accuracy\s+([0-9.]+)%", line)
    if m:  # correct from the accuracy: exact with a few questions a section
        covered = int(m.group(2))
        ours.append((m.group(1), covered, round(float(m.group(4)) * covered / 100)))
    m = re.match(r"^analogy accuracy .* \((\d+) of (\d+) covered questions; (\d+) questions", line)
    if m:
        summary = tuple(int(x) for x in m.groups())
questions = sum(1 for l in open(tmp + "/q.txt") if not l.startswith(":") and len(l.split()) == 4)
want_summary = (len(total["correct"]), len(total["correct"]) + len(total["incorrect"]), questions)
fail = []
if ours != theirs:
    fail.append("sections (name, covered, correct): ours %s, gensim %s" % (ours, theirs))
if summary != want_summary:
    fail.append("totals (correct, covered, questions): ours %s, gensim %s" % (summary, want_summary))
if not (0 < want_summary[0] < want_summary[1]):
    fail.append("the crafted case should have right and wrong answers: %s" % (want_summary,))
for f in fail: print("FAIL (restrict %d):" % R, f)
print("restrict %d: %d sections, %s correct/covered/questions as gensim" % (R, len(ours), summary))
sys.exit(1 if fail else 0)
EOF
    return $rc
}
fail=0
check 100000 || fail=1
check 20 || fail=1

# a directory as the questions file: a read error, status 1
set +e
"$w2v" -evaluate "$tmp/v.txt" -questions "$tmp" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
set -e
if [ $rc -ne 1 ] || ! grep -q "cannot read" "$tmp/err.txt" || [ -s "$tmp/out.txt" ]; then
    echo "FAIL: -questions DIRECTORY: status $rc (want 1), stderr: $(cat "$tmp/err.txt")"
    fail=1
else
    echo "a directory as -questions: status 1"
fi
exit $fail
