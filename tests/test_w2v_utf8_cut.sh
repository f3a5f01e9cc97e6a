#!/usr/bin/env bash
# A valid UTF-8 corpus whose words run past the 99-byte cut gives a vectors file that
# gensim's load_word2vec_format reads (it decodes every word as UTF-8), and the cut words
# are those Python gets by cutting the word's bytes at 99 and dropping a trailing partial
# character. Skips (exit 77) when python3-gensim or the programs are missing.
# usage: tests/test_w2v_utf8_cut.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import gensim' 2>/dev/null; then
    echo "SKIP test_w2v_utf8_cut: python3-gensim is not installed (apt-get install python3-gensim)"
    exit 77
fi
w2v=$build/sgrad-w2v
if [ ! -x "$w2v" ]; then
    echo "SKIP test_w2v_utf8_cut: $w2v is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$py" - "$tmp/u.txt" <<'EOF'
import sys
long = ["é" * 60, "a" + "é" * 60, "€" * 40, "ab" + "€" * 40, "\U0001F600" * 30]
open(sys.argv[1], "w", encoding="utf-8").write(("le chat " + " ".join(long) + " noir\n") * 50)
EOF
for binary in 0 1; do
    "$w2v" -train "$tmp/u.txt" -output "$tmp/u.vec" -min-count 1 -iter 1 -size 10 -sample 0 \
        -threads 1 -binary $binary -debug 0
    "$py" - "$tmp/u.txt" "$tmp/u.vec" $binary <<'EOF'
import sys
from gensim.models import KeyedVectors
corpus, vec, binary = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
want = {w.encode()[:99].decode("utf-8", errors="ignore") for w in open(corpus, encoding="utf-8").read().split()}
kv = KeyedVectors.load_word2vec_format(vec, binary=binary)
got = set(kv.index_to_key)
if got != want:
    print("FAIL (binary %d): words %s, want %s" % (binary, sorted(got - want), sorted(want - got)))
    sys.exit(1)
print("binary %d: %d words, as Python cuts them" % (binary, len(got)))
EOF
done
