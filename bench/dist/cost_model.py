#!/usr/bin/env python3
"""The README's cost model of the MPI module: bytes per rank per step and communication
time at P machines, for the embedding train step (B lookups per rank, a (V, D) f32 table)
and for a skip-gram word2vec step (sgrad-w2v: E examples of one input row, one positive
and `negative` sampled output rows), three ways: the data-parallel sparse exchange
(sg_dist_reduce_grads, allgatherv of coalesced rows), the dense allreduce it falls back to,
and the sharded table (sg_dist_table: indices to the owners, rows back, gradient rows to
the owners).

Time = latency terms (alpha per message round) + bytes / beta, with:
- ring algorithms (allgather: P - 1 rounds; reduce-scatter + allgather: 2 (P - 1));
- an alltoallv costs P - 1 message rounds (pairwise exchange: the pessimistic case; a
  runtime that posts them all at once pays about one alpha plus a per-message overhead);
- a one-int allreduce (the module's status agreements) costs log2(P) rounds;
- full-duplex links and a non-blocking switch, so a rank's sends and receives overlap and
  the time is the larger of the bytes it sends and receives, over beta;
- indices spread uniformly over rows and ranks (each rank serves as many rows as it asks).
Unique rows of a batch are expectations: uniform draws for the embedding step; for word2vec
the unigram (inputs, positives) and unigram^0.75 (negatives) of a corpus's words seen at
least min_count times (default: data/demo-corpus.txt.xz, without subsampling).
Local compute is not modelled (it is the one-rank step, which sgrad-bench dist reports).

    python3 bench/dist/cost_model.py [--alpha-us 20] [--gbit 25] [--corpus FILE]
"""
import argparse
import collections
import lzma
import math
import os


def unique(probs, draws):
    """Expected distinct outcomes of `draws` independent draws from probs."""
    return sum(1.0 - (1.0 - p) ** draws for p in probs)


def alltoall_rounds(P):
    return P - 1


def model(P, alpha, beta, tables, batch_rows):
    """tables: [(V, D, u)] with u the unique rows one rank touches per step; batch_rows:
    [(rows looked up per rank, D)] for the sharded exchange. Returns (name, bytes, s)."""
    out = []
    if P == 1:
        return [("sparse", 0, 0.0), ("dense", 0, 0.0), ("sharded", 0, 0.0)]
    s = 4  # f32
    sp_bytes = sum(u * (8 + D * s) * (P - 1) for V, D, u in tables)
    sp_time = (P - 1) * alpha + sp_bytes / beta
    out.append(("sparse", sp_bytes, sp_time))
    de_bytes = sum(2 * (P - 1) / P * (V * D * s + math.ceil(V / 8)) for V, D, u in tables)
    de_time = 2 * (P - 1) * alpha + de_bytes / beta
    out.append(("dense", de_bytes, de_time))
    remote = (P - 1) / P
    sh_bytes = 16 * (P - 1) + sum(n * remote * (8 + 2 * D * s) for n, D in batch_rows)
    rounds = 4 * alltoall_rounds(P) + 3 * math.log2(P)
    out.append(("sharded", sh_bytes, rounds * alpha + sh_bytes / beta))
    return out


def corpus_probs(path, min_count):
    counts = collections.Counter()
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            counts.update(line.split())
    kept = [c for c in counts.values() if c >= min_count]
    total = sum(kept)
    uni = [c / total for c in kept]
    z = sum(c ** 0.75 for c in kept)
    neg = [c ** 0.75 / z for c in kept]
    return uni, neg


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha-us", type=float, default=20.0, help="per-message latency, microseconds")
    ap.add_argument("--gbit", type=float, default=25.0, help="link speed, Gbit/s")
    ap.add_argument("--corpus", default=os.path.join(here, "..", "..", "data", "demo-corpus.txt.xz"))
    ap.add_argument("--min-count", type=int, default=5)
    ap.add_argument("--examples", type=int, default=2200, help="skip-gram examples per batch")
    ap.add_argument("--negative", type=int, default=5)
    ap.add_argument("--dim", type=int, default=100)
    a = ap.parse_args()
    alpha, beta = a.alpha_us * 1e-6, a.gbit * 1e9 / 8
    ranks = (8, 16, 64)

    B, D, V = 10000, 64, 1000000
    u = V * (1 - (1 - 1 / V) ** B)
    print(f"alpha {a.alpha_us:g} us, beta {beta / 1e9:.3g} GB/s")
    print(f"embedding step: B {B} per rank, D {D}, V {V}; unique rows per rank {u:.0f}")
    print("| P | sparse allgather MB, ms | dense allreduce MB, ms | sharded table MB, ms |")
    print("| --- | --- | --- | --- |")
    for P in ranks:
        r = model(P, alpha, beta, [(V, D, u)], [(B, D)])
        print(f"| {P} | " + " | ".join(f"{b / 1e6:.3g}, {t * 1e3:.3g}" for _, b, t in r) + " |")

    uni, neg = corpus_probs(a.corpus, a.min_count)
    E, k, Dw, Vw = a.examples, a.negative, a.dim, len(uni)
    u_in = unique(uni, E)
    # an output row is touched by a positive (unigram) or a negative (unigram^0.75)
    u_out = sum(1 - (1 - p) ** E * (1 - q) ** (k * E) for p, q in zip(uni, neg))
    print(f"word2vec step ({os.path.basename(a.corpus)}, min-count {a.min_count}): V {Vw}, D {Dw}, "
          f"{E} examples, negative {k}; unique rows per rank: input {u_in:.0f}, output {u_out:.0f}")
    print("| P | sparse allgather MB, ms | dense allreduce MB, ms | sharded tables MB, ms |")
    print("| --- | --- | --- | --- |")
    for P in ranks:
        r = model(P, alpha, beta, [(Vw, Dw, u_in), (Vw, Dw, u_out)], [(E, Dw), (E * (1 + k), Dw)])
        print(f"| {P} | " + " | ".join(f"{b / 1e6:.3g}, {t * 1e3:.3g}" for _, b, t in r) + " |")


if __name__ == "__main__":
    main()
