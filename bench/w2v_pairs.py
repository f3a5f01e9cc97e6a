"""Word-pair neighbour hits: a word-similarity measure for word vectors, a second one
beside analogy accuracy.

    /usr/bin/python3 bench/w2v_pairs.py VECTORS QUESTIONS [--restrict 30000] [--k 10]

The pairs are the distinct word pairs of the analogy file (questions-words.txt: each
question "a b c d" holds the related pairs (a, b) and (c, d): a capital and its country,
a verb and its past tense, ...), lowercased (`sgrad-w2v -evaluate` ignores ASCII case).
A query is one word of a pair whose two words are both among the RESTRICT most frequent
words (the file's first rows); it hits when the other word is among its K nearest neighbours by
cosine similarity in those rows (the query itself excluded). Each pair gives two queries
(a to b, b to a). Prints "pair hits@K P% (HITS of QUERIES queries, PAIRS pairs)".

Reads word2vec's text format (a "rows dim" header, then "word v1 ... vD" lines; fastText's
.vec and gensim's save_word2vec_format write it) and its binary format (sgrad-w2v and
word2vec.c with -binary 1). Needs numpy.
"""
import argparse
import sys

import numpy as np


def read_vectors(path, restrict):
    with open(path, "rb") as f:
        header = f.readline().split()
        rows, dim = int(header[0]), int(header[1])
        n = min(rows, restrict) if restrict > 0 else rows
        words, vecs = [], np.empty((n, dim), dtype=np.float32)
        pos = f.tell()  # text rows parse as a word and dim numbers; binary ones do not
        binary = not _is_text_row(f.readline(), dim)
        f.seek(pos)
        for i in range(n):
            if binary:
                w = bytearray()
                while True:
                    c = f.read(1)
                    if not c:
                        raise ValueError("%s: cut off at row %d" % (path, i))
                    if c == b" ":
                        break
                    if c != b"\n" or w:
                        w += c
                words.append(w.decode("utf-8", "replace"))
                vecs[i] = np.frombuffer(f.read(4 * dim), dtype="<f4")
            else:
                parts = f.readline().split()
                if len(parts) != dim + 1:
                    raise ValueError("%s: row %d has %d fields" % (path, i, len(parts)))
                words.append(parts[0].decode("utf-8", "replace"))
                vecs[i] = np.asarray(parts[1:], dtype=np.float32)
    return words, vecs


def _is_text_row(line, dim):
    fields = line.split()
    if len(fields) != dim + 1:
        return False
    try:
        np.asarray(fields[1:], dtype=np.float32)
        return True
    except ValueError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vectors")
    ap.add_argument("questions")
    ap.add_argument("--restrict", type=int, default=30000)
    ap.add_argument("--k", type=int, default=10)
    a = ap.parse_args()
    words, vecs = read_vectors(a.vectors, a.restrict)
    index = {w: i for i, w in enumerate(words)}
    pairs = set()
    for line in open(a.questions, encoding="utf-8"):
        q = line.lower().split()
        if len(q) != 4 or line.startswith(":"):
            continue
        pairs.add((q[0], q[1]))
        pairs.add((q[2], q[3]))
    covered = sorted((index[x], index[y]) for x, y in pairs if x in index and y in index)
    if not covered:
        print("pair hits@%d n/a (0 queries, %d pairs)" % (a.k, len(pairs)))
        return 1
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    unit = vecs / np.where(norms > 0, norms, 1)
    queries = [(x, y) for x, y in covered] + [(y, x) for x, y in covered]
    hits = 0
    for start in range(0, len(queries), 512):
        block = queries[start:start + 512]
        sims = unit[[q for q, _ in block]] @ unit.T
        sims[np.arange(len(block)), [q for q, _ in block]] = -np.inf
        top = np.argpartition(-sims, a.k, axis=1)[:, :a.k]
        hits += sum(int(t in row) for (_, t), row in zip(block, top))
    print("pair hits@%d %.2f%% (%d of %d queries, %d pairs)" % (a.k, 100.0 * hits / len(queries), hits,
                                                              len(queries), len(covered)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
