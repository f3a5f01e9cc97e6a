#!/usr/bin/env bash
# data/wordnet-kg is what data/prepare_wordnet_kg.py makes: rebuilt from wordnet-base's
# WordNet 3.0 files into a scratch directory, its triples and licence are those committed.
# Skips (exit 77) without wordnet-base or python3.
# usage: tests/test_wordnet_kg_data.sh [BUILD_DIR]   (run from the source root)
set -uo pipefail
if [ ! -f /usr/share/wordnet/data.noun ] || ! command -v python3 >/dev/null; then
    echo "SKIP test_wordnet_kg_data: needs python3 and Debian's wordnet-base (/usr/share/wordnet)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 data/prepare_wordnet_kg.py --output "$tmp" 2>"$tmp/log"; then
    cat "$tmp/log"
    echo "FAIL: data/prepare_wordnet_kg.py"
    exit 1
fi
fail=0
# the triples are compared decompressed: another liblzma may compress the same text otherwise
for f in train valid test; do
    cmp -s <(xz -dc "$tmp/$f.tsv.xz") <(xz -dc "data/wordnet-kg/$f.tsv.xz") ||
        { echo "FAIL: data/wordnet-kg/$f.tsv.xz holds other triples than a rebuild"; fail=1; }
done
cmp -s "$tmp/LICENSE" data/wordnet-kg/LICENSE || { echo "FAIL: data/wordnet-kg/LICENSE differs from a rebuild"; fail=1; }
[ $fail -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
