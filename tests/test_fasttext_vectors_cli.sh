#!/usr/bin/env bash
# sgrad-fasttext skipgram / cbow end to end, checked against recomputations: the vector
# print-word-vectors gives a word never seen equals the mean of its n-gram rows read
# from model.bin and hashed here in Python (FNV-1a, fastText's n-grams; a bucket not
# stored is zero, so a word none of whose n-grams training met gets the zero vector); a known word's vector is its model.vec row; nn's answers are the
# nearest words by cosine over model.vec recomputed here; model.vec loads in gensim (that
# part skipped without gensim); -thread 1 and 2 train the same model.bin. The corpus
# holds label tokens (fastText keeps them out of the words; the model must still load)
# and a 147-byte word: a query of it is one query, printed whole, answered for its first
# 99 bytes as training cut it. -maxn 0 (whatever -minn) gives a model without n-grams.
# A run that cannot write model.vec (ulimit -f) leaves model.bin and model.vec as they
# were, saying why once; answers that cannot be written (/dev/full) fail the verb. Bad input
# (-minn > -maxn, -bucket 0 with -maxn > 0, an empty file, a -loss other than ns, a
# classifier given to print-word-vectors / nn, a vectors model given to test / predict):
# a message, a non-zero exit, model.bin and model.vec unchanged. Skips (exit 77) without
# the program or python3.
# usage: tests/test_fasttext_vectors_cli.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
ft=$build/sgrad-fasttext
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3 || true)
if [ ! -x "$ft" ]; then
    echo "SKIP test_fasttext_vectors_cli: $ft is not built here (SGRAD_BUILD_TOOLS=OFF)"
    exit 77
fi
if [ -z "$py" ]; then
    echo "SKIP test_fasttext_vectors_cli: no python3 for the recomputations"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
words=(walk walks walked walking talk talks talked the a of dog dogs cat cats "r""\xc3\xa9""sum""\xc3\xa9")
for i in $(seq 400); do
    line=""
    for j in 1 2 3 4 5 6 7; do line+=" ${words[$(((i * 7 + j * j * 3 + i / 5) % 15))]}"; done
    printf "%b\n" "${line# }"
done >"$tmp/corpus.txt"
long=$(printf 'antidis%.0s' $(seq 21)) # 147 bytes; training keeps its first 99
for i in $(seq 20); do echo "walk $long the dog"; echo "__label__x talk the __label__y cat"; done >>"$tmp/corpus.txt"
small="-dim 8 -epoch 2 -bucket 20000 -minCount 1 -thread 1 -verbose 0"
for verb in skipgram cbow; do
    "$ft" $verb -input "$tmp/corpus.txt" -output "$tmp/$verb" $small || { echo "FAIL: $verb training"; fail=1; }
done
"$ft" skipgram -input "$tmp/corpus.txt" -output "$tmp/two" ${small/-thread 1/-thread 2}
cmp -s "$tmp/skipgram.bin" "$tmp/two.bin" || { echo "FAIL: -thread 1 and 2 trained different models"; fail=1; }

for verb in skipgram cbow; do
    m=$tmp/$verb
    printf 'walker\ntalkings\ncats\nr\xc3\xa9sum\xc3\xa9s\nzz\n%s\n' "$long" >"$tmp/q.txt"
    "$ft" print-word-vectors "$m.bin" <"$tmp/q.txt" >"$tmp/pwv.txt" || { echo "FAIL: print-word-vectors ($verb)"; fail=1; }
    printf 'walked\ntalker\n%s\n' "$long" | "$ft" nn "$m.bin" 3 >"$tmp/nn.txt" || { echo "FAIL: nn ($verb)"; fail=1; }
    printf 'walk walked talk\n' | "$ft" analogies "$m.bin" 2 >"$tmp/an.txt" || { echo "FAIL: analogies ($verb)"; fail=1; }
    "$py" - "$m.bin" "$m.vec" "$tmp/q.txt" "$tmp/pwv.txt" "$tmp/nn.txt" "$tmp/an.txt" <<'EOF' || fail=1
import json, math, struct, sys
model, vec, queries, pwv, nn, an = sys.argv[1:7]
blob = open(model, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
meta = header.pop("__metadata__")
data = blob[8 + n:]
def tensor(name, fmt, size):
    b, e = header[name]["data_offsets"]
    return list(struct.unpack("<%d%s" % ((e - b) // size, fmt), data[b:e])), header[name]["shape"]
words = meta["fasttext.words"].split("\n")
def as_trained(token):  # the reader keeps a token's first 99 bytes (the test's long one is ASCII)
    return token.encode()[:99].decode()
D, bucket = int(meta["fasttext.dim"]), int(meta["fasttext.bucket"])
minn, maxn = int(meta["fasttext.minn"]), int(meta["fasttext.maxn"])
wrows, _ = tensor("input/words", "f", 4)
brows, _ = tensor("input/bucket_rows", "q", 8)
bvals, _ = tensor("input/bucket_values", "f", 4)
stored = {b: bvals[i * D:(i + 1) * D] for i, b in enumerate(brows)}
def fnv(s):  # fastText: each byte sign-extended before the xor
    h = 2166136261
    for c in s:
        h ^= (c - 256 if c >= 128 else c) & 0xFFFFFFFF
        h = (h * 16777619) & 0xFFFFFFFF
    return h
def ngrams(word):  # of "<word>" in UTF-8 characters, minn..maxn, not "<" or ">" alone
    chars = ["<"] + list(word) + [">"]
    out = []
    for i in range(len(chars)):
        for k in range(minn, maxn + 1):
            if i + k > len(chars): break
            if k == 1 and (i == 0 or i + k == len(chars)): continue
            out.append("".join(chars[i:i + k]).encode())
    return out
def vector(word):
    rows = [wrows[words.index(word) * D:(words.index(word) + 1) * D]] if word in words else []
    if word != "</s>":  # the end-of-line word has no n-gram
        rows += [stored.get(fnv(g) % bucket, [0.0] * D) for g in ngrams(word)]
    return [sum(r[d] for r in rows) / len(rows) for d in range(D)] if rows else [0.0] * D
ok = True
table = {}
with open(vec, encoding="utf-8") as f:
    V, dim = map(int, f.readline().split())
    for line in f:
        p = line.split()
        table[p[0]] = [float(x) for x in p[1:]]
if V != len(words) or dim != D or list(table) != words:
    print("FAIL: model.vec's words are not the model's vocabulary in order"); ok = False
if any(w.startswith("__label__") for w in words) or meta["fasttext.labels"].split("\n") != ["__label__x", "__label__y"]:
    print("FAIL: the labels are not kept apart from the words:", meta["fasttext.labels"]); ok = False
for w in words:  # a vocabulary word's .vec row is its bag mean
    if max(abs(a - b) for a, b in zip(table[w], vector(w))) > 1e-6:
        print("FAIL: .vec row of", w, "is not the mean of its rows"); ok = False
qs = open(queries, encoding="utf-8").read().split()
got = [l.split() for l in open(pwv, encoding="utf-8")]
if [g[0] for g in got] != qs:
    print("FAIL: print-word-vectors did not answer each word once, in order"); ok = False
for g in got:
    want = vector(as_trained(g[0]))
    if g[0] not in words and g[0] != "zz" and not any(want):  # zz: none, a zero vector
        print("FAIL: no stored n-gram for", g[0], "(the test needs one)"); ok = False
    for a, b in zip(map(float, g[1:]), want):
        if abs(a - b) > 1e-4 * max(abs(b), 1e-3):  # printed with 5 significant digits
            print("FAIL: print-word-vectors", g[0], a, "vs", b); ok = False
            break
def unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v] if n > 0 else v
def nearest(q, ban, k):
    qn = math.sqrt(sum(x * x for x in q)) or 1
    sims = [(sum(a * b for a, b in zip(unit(table[w]), q)) / qn, w) for w in words if w not in ban]
    return sorted(sims, key=lambda s: -s[0])[:k]
def answers(path, prompt, queries, k):
    text = open(path, encoding="utf-8").read()
    parts = text.split(prompt)
    if len(parts) != len(queries) + 2 or parts[0] or parts[-1]:
        print("FAIL:", path, "has not one prompt per query and one at the end:", repr(text[:200]))
        return False
    good = True
    for part, (q, ban) in zip(parts[1:], queries):
        lines = [l.split() for l in part.strip("\n").split("\n")]
        want = nearest(q, ban, k)
        if [l[0] for l in lines] != [w for _, w in want] or any(abs(float(l[1]) - s) > 1e-4 for l, (s, _) in zip(lines, want)):
            print("FAIL:", path, lines, "wanted", want); good = False
    return good
long = as_trained(qs[-1])
ok &= answers(nn, "Query word? ", [(vector("walked"), {"walked"}), (vector("talker"), set()),
                                   (vector(long), {long})], 3)
a, b, c = (unit(vector(w)) for w in ("walk", "walked", "talk"))
ok &= answers(an, "Query triplet (A - B + C)? ", [([x - y + z for x, y, z in zip(a, b, c)], {"walk", "walked", "talk"})], 2)
sys.exit(0 if ok else 1)
EOF
done

if "$py" -c 'import gensim' 2>/dev/null; then
    "$py" - "$tmp/skipgram.vec" <<'EOF' || { echo "FAIL: gensim cannot read model.vec"; fail=1; }
import sys
from gensim.models import KeyedVectors
kv = KeyedVectors.load_word2vec_format(sys.argv[1], binary=False)
assert len(kv.index_to_key) == 17 and kv.vector_size == 8 and kv.index_to_key[0] in ("</s>", "the")
EOF
else
    echo "skip: gensim is not installed (the .vec load check)"
fi

# ---- -maxn 0: no character n-grams whatever -minn (3 by default), as fastText's -maxn 0
"$ft" skipgram -input "$tmp/corpus.txt" -output "$tmp/nosub" $small -maxn 0 2>"$tmp/err.txt" ||
    { echo "FAIL: skipgram -maxn 0:"; cat "$tmp/err.txt"; fail=1; }
printf 'walked\nwalker\n' | "$ft" print-word-vectors "$tmp/nosub.bin" >"$tmp/pwv.txt"
"$py" - "$tmp/nosub.bin" "$tmp/nosub.vec" "$tmp/pwv.txt" <<'EOF' || fail=1
import json, struct, sys
try:
    blob = open(sys.argv[1], "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    meta = json.loads(blob[8:8 + n])["__metadata__"]
    vec = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in list(open(sys.argv[2], encoding="utf-8"))[1:]}
    got = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in open(sys.argv[3], encoding="utf-8")}
except (OSError, KeyError, IndexError, ValueError) as e:
    sys.exit("FAIL: -maxn 0 model or answers unreadable: %r" % e)
# no bucket table: a known word is its own row (its .vec row), an unknown one has no row
if meta["fasttext.maxn"] != "0" or meta["fasttext.bucket"] != "0" or meta["fasttext.bucket_rows"] != "0":
    sys.exit("FAIL: -maxn 0 kept n-grams: " + str({k: meta[k] for k in ("fasttext.maxn", "fasttext.bucket")}))
if sorted(got) != ["walked", "walker"] or any(got["walker"]) or \
        any(abs(a - b) > 1e-4 * max(abs(b), 1e-3) for a, b in zip(got["walked"], vec["walked"])):
    sys.exit("FAIL: -maxn 0 vectors: %s, .vec: %s" % (got, vec["walked"]))
EOF
"$ft" supervised -input "$tmp/corpus.txt" -output "$tmp/nosubsup" -dim 4 -epoch 1 -minn 3 -maxn 0 -verbose 0 \
    2>"$tmp/err.txt" || { echo "FAIL: supervised -minn 3 -maxn 0:"; cat "$tmp/err.txt"; fail=1; }

# ---- a run that cannot write model.vec leaves both old files: with a corpus of many
# words model.vec (text) is larger than model.bin, and ulimit -f lets model.bin through only
for i in $(seq 300); do echo "u$i u$(((i * 7) % 300)) u$(((i * 13) % 300)) the"; done >"$tmp/many.txt"
pair="-dim 16 -epoch 1 -minCount 1 -minn 0 -maxn 0 -thread 1 -verbose 0"
"$ft" skipgram -input "$tmp/many.txt" -output "$tmp/pair" $pair || { echo "FAIL: training pair"; fail=1; }
cp "$tmp/pair.bin" "$tmp/pair.keep.bin"
cp "$tmp/pair.vec" "$tmp/pair.keep.vec"
bin_kb=$(($(stat -c %s "$tmp/pair.bin") / 1024)) vec_kb=$(($(stat -c %s "$tmp/pair.vec") / 1024))
if [ $((vec_kb - bin_kb)) -lt 8 ]; then
    echo "FAIL: pair.vec ($vec_kb kB) is not larger than pair.bin ($bin_kb kB): the ulimit test needs it"; fail=1
fi
(trap '' XFSZ; ulimit -f $(((bin_kb + vec_kb) / 2)); exec "$ft" skipgram -input "$tmp/many.txt" -output "$tmp/pair" $pair -seed 7) 2>"$tmp/err.txt"
got=$?
if [ $got -eq 0 ] || ! cmp -s "$tmp/pair.bin" "$tmp/pair.keep.bin" || ! cmp -s "$tmp/pair.vec" "$tmp/pair.keep.vec"; then
    echo "FAIL: a run that could not write pair.vec exited $got and changed pair.bin or pair.vec:"; cat "$tmp/err.txt"; fail=1
fi
if [ "$(grep -o 'cannot write' "$tmp/err.txt" | wc -l)" -ne 1 ] || ! grep -q "File too large" "$tmp/err.txt" ||
    ! grep -q "pair.bin and .*pair.vec left as they were" "$tmp/err.txt"; then
    echo "FAIL: the write error is not said once:"; cat "$tmp/err.txt"; fail=1
fi
ls "$tmp" | grep -q "staged\|\.tmp-" && { echo "FAIL: staged files left behind:"; ls "$tmp"; fail=1; }
"$ft" skipgram -input "$tmp/many.txt" -output "$tmp/pair" $pair -seed 7 || { echo "FAIL: training pair again"; fail=1; }
cmp -s "$tmp/pair.bin" "$tmp/pair.keep.bin" && { echo "FAIL: -seed 7 trained the same pair.bin (the test needs another)"; fail=1; }

# ---- answers that cannot be written fail the verb, saying so
if [ -w /dev/full ]; then
    for verb in print-word-vectors nn analogies; do
        echo "walk walked talk" | "$ft" $verb "$tmp/skipgram.bin" >/dev/full 2>"$tmp/err.txt"
        got=$?
        [ $got -eq 1 ] && grep -q "error writing the output: No space left on device" "$tmp/err.txt" ||
            { echo "FAIL: $verb >/dev/full exited $got:"; cat "$tmp/err.txt"; fail=1; }
    done
else
    echo "skip: no /dev/full (the output error check)"
fi

# ---- bad input: a message, a non-zero exit, the model files unchanged
cp "$tmp/skipgram.bin" "$tmp/keep.bin"
cp "$tmp/skipgram.vec" "$tmp/keep.vec"
printf '__label__a w1 w2\n__label__b w3 w1\n' >"$tmp/labelled.txt"
"$ft" supervised -input "$tmp/labelled.txt" -output "$tmp/classifier" -dim 4 -epoch 1 -verbose 0 ||
    { echo "FAIL: training the classifier"; fail=1; }
expect() {
    local pattern=$1
    shift
    "$ft" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" <"$tmp/q.txt"
    local got=$?
    if [ "$got" -eq 0 ] || ! grep -q -- "$pattern" "$tmp/err.txt" || ! cmp -s "$tmp/skipgram.bin" "$tmp/keep.bin" ||
        ! cmp -s "$tmp/skipgram.vec" "$tmp/keep.vec"; then
        echo "FAIL: sgrad-fasttext $* exited $got (wanted non-zero, stderr matching '$pattern', model files unchanged):"
        cat "$tmp/err.txt"
        fail=1
    fi
}
: >"$tmp/empty.txt"
out=(-output "$tmp/skipgram")
expect "-minn 5 > -maxn 3" skipgram -input "$tmp/corpus.txt" "${out[@]}" -minn 5 -maxn 3
expect "-bucket 0" cbow -input "$tmp/corpus.txt" "${out[@]}" -bucket 0
expect "no token" skipgram -input "$tmp/empty.txt" "${out[@]}"
expect "-minCount" skipgram -input "$tmp/corpus.txt" "${out[@]}" -minCount 100000
# both outputs are checked before training: with MODEL.vec a directory nothing is written
mkdir "$tmp/dirout.vec"
expect "dirout.vec: it is a directory" skipgram -input "$tmp/corpus.txt" -output "$tmp/dirout"
[ ! -e "$tmp/dirout.bin" ] || { echo "FAIL: dirout.bin written although dirout.vec cannot be"; fail=1; }
expect "-loss ns only" skipgram -input "$tmp/corpus.txt" "${out[@]}" -loss softmax
expect "classifier" print-word-vectors "$tmp/classifier.bin"
expect "classifier" nn "$tmp/classifier.bin"
expect "word-vector" test "$tmp/skipgram.bin" "$tmp/labelled.txt"
expect "word-vector" predict "$tmp/skipgram.bin" -
expect "not a sgrad-fasttext model" analogies "$tmp/skipgram.vec"
[ $fail -eq 0 ] && echo "ok test_fasttext_vectors_cli"
exit $fail
