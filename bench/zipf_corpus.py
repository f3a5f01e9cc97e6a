#!/usr/bin/env python3
"""A synthetic Zipf corpus for bench/w2v_scale.sh, deterministic given its arguments.

Word of rank r (1..vocab) is named "w<r>" and occurs max(min_count, floor(A r^-exponent))
times, with A chosen so that the counts sum to the asked token count (the remainder of
the floors goes one each to the most frequent words). So exactly `vocab` words survive
`-min-count min_count`. Besides them, `rare` words "r<i>" occur 1..min_count-1 times each
(they fall under min-count, as a real corpus's tail does, and count as tokens). The
tokens are shuffled by numpy's PCG64 generator seeded with `seed` and written `line`
words to a line.

The metadata (a JSON object, --meta) gives the counts and, for a skip-gram run with
subsampling threshold `sample` and window `window`, the expected kept tokens per epoch
(word2vec.c's keep probability, which gensim and sgrad-w2v use too) and the expected
(centre, context) pairs per epoch: kept tokens x (window + 1), since a window shrunk to a
uniform 1..window reaches (window + 1) / 2 words on each side; sentence ends, which cut
some windows, are ignored (lines are long).
"""
import argparse
import json
import sys

import numpy as np


def vocab_counts(vocab, tokens, exponent, min_count):
    """Counts (descending) of `vocab` words summing to `tokens`, each >= min_count."""
    if tokens < vocab * min_count:
        sys.exit(f"zipf_corpus: {tokens} tokens cannot give {vocab} words {min_count} times each")
    base = np.arange(1, vocab + 1, dtype=np.float64) ** -exponent

    def total(a):
        return int(np.maximum(min_count, np.floor(a * base)).sum())

    lo, hi = 0.0, float(tokens) / base[-1]
    for _ in range(200):  # total(a) is non-decreasing in a
        mid = (lo + hi) / 2
        if total(mid) <= tokens:
            lo = mid
        else:
            hi = mid
    counts = np.maximum(min_count, np.floor(lo * base)).astype(np.int64)
    rest = tokens - int(counts.sum())
    while rest > 0:  # the floors' remainder, one each to the most frequent words
        k = min(rest, vocab)
        counts[:k] += 1
        rest -= k
    return counts


def keep_prob(counts, sample, train_words):
    if sample <= 0:
        return np.ones(len(counts))
    f = sample * train_words / counts
    return np.minimum(1.0, (np.sqrt(1.0 / f) + 1.0) * f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, required=True, help="words surviving min-count")
    ap.add_argument("--tokens", type=int, required=True, help="tokens in all, rare words included")
    ap.add_argument("--out", required=True)
    ap.add_argument("--meta", help="write the metadata JSON here (default: stdout)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--exponent", type=float, default=1.0, help="Zipf exponent")
    ap.add_argument("--min-count", type=int, default=5)
    ap.add_argument("--rare", type=int, default=-1, help="words under min-count (default vocab/10)")
    ap.add_argument("--line", type=int, default=1000, help="words per line")
    ap.add_argument("--sample", type=float, default=1e-4)
    ap.add_argument("--window", type=int, default=5)
    a = ap.parse_args()
    if a.vocab < 1 or a.line < 1 or a.min_count < 1:
        sys.exit("zipf_corpus: --vocab, --line and --min-count must be at least 1")
    rare = a.vocab // 10 if a.rare < 0 else a.rare
    rare_counts = (np.arange(rare, dtype=np.int64) % max(1, a.min_count - 1)) + 1
    if a.min_count == 1:
        rare_counts = np.zeros(0, dtype=np.int64)
        rare = 0
    counts = vocab_counts(a.vocab, a.tokens - int(rare_counts.sum()), a.exponent, a.min_count)

    names = np.array([f"w{r}" for r in range(1, a.vocab + 1)] + [f"r{i}" for i in range(rare)],
                     dtype=object)
    ids = np.repeat(np.arange(a.vocab + rare, dtype=np.int32), np.concatenate([counts, rare_counts]))
    np.random.Generator(np.random.PCG64(a.seed)).shuffle(ids)
    with open(a.out, "w") as f:
        for s in range(0, len(ids), a.line):
            f.write(" ".join(names[ids[s:s + a.line]]))
            f.write("\n")

    train_words = int(counts.sum())
    kept = float((counts * keep_prob(counts, a.sample, train_words)).sum())
    meta = {"vocab": a.vocab, "tokens": int(len(ids)), "rare_words": rare,
            "train_words": train_words, "min_count": a.min_count, "exponent": a.exponent,
            "seed": a.seed, "line": a.line, "sample": a.sample, "window": a.window,
            "top_count": int(counts[0]), "kept_per_epoch": round(kept),
            "pairs_per_epoch": round(kept * (a.window + 1))}
    text = json.dumps(meta)
    if a.meta:
        with open(a.meta, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
