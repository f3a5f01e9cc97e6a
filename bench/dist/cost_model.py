#!/usr/bin/env python3
"""The cost model of the MPI module (docs/mpi.md, docs/kge.md): bytes per rank per step and
communication time at P machines, for the embedding train step (B lookups per rank, a
(V, D) f32 table), for a skip-gram word2vec step (sgrad-w2v: E examples of one input row,
one positive and `negative` sampled output rows), and for an epoch of knowledge-graph
training at Freebase's scale (sgrad-kge under mpirun; --kge-* below), three ways: the data-parallel sparse exchange
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
        [--kge-rate EDGES_PER_CORE_S] [--kge-cores 48] [--kge-batch 10000]

The knowledge-graph part: E entities, M edges, R relations, dim d (Freebase as DGL-KE
trained it: 86,054,151 entities, 338,586,276 edges, 14,824 relations, d 400), reciprocal
training (two tail queries an edge), chunks of C = 1000 edges sharing N = 1000 negatives
per query side, B edges per rank-step. A step looks up 2B true rows and 2 (B / C) N
negatives through the sharded entity table, and reduces the relation rows it touched
(replicated parameters: a sparse allgather or a dense allreduce, whichever is cheaper, as
the module's rule picks; relations uniform: the worst case). Compute per
step is B / (cores x rate), rate the measured training edges/s of one core at d 400 on
this project's machine (docs/performance.md), scaled by nothing: a 48-core machine is
taken as 48 of these cores. Epoch time = steps x (compute + communication), nothing
overlapped.
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
    ap.add_argument("--kge-rate", type=float, default=9320.0, help="training edges/s of one core, d 400")
    ap.add_argument("--kge-cores", type=int, default=48)
    ap.add_argument("--kge-batch", type=int, default=10000, help="edges per rank-step")
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
    kge(a, alpha, beta, ranks)


def kge(a, alpha, beta, ranks):
    E, M, R, d, C, N = 86054151, 338586276, 14824, 400, 1000, 1000
    B = a.kge_batch
    lookups = 2 * B + 2 * (B // C) * N
    u_rel = 2 * R * (1 - (1 - 1 / (2 * R)) ** (2 * B))
    print(f"knowledge graph at Freebase's scale: E {E}, M {M}, R {R}, d {d}; B {B} edges per "
          f"rank-step, chunks of {C} with {N} negatives per side; {lookups} entity lookups and "
          f"{u_rel:.0f} relation rows per step; {a.kge_cores} cores x {a.kge_rate:g} edges/s")
    print("| P | entity rows per rank | MB per rank-step | comm ms per step | compute ms per step "
          "| steps per epoch | epoch, minutes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for P in ranks:
        r = model(P, alpha, beta, [(2 * R, d, u_rel)], [(lookups, d)])
        rel = min(r[0], r[1], key=lambda x: x[2])  # the module's rule: sparse or dense
        comm_bytes = rel[1] + r[2][1]
        comm_s = rel[2] + r[2][2]
        compute_s = B / (a.kge_cores * a.kge_rate)
        steps = math.ceil(M / (P * B))
        print(f"| {P} | {E / P / 1e6:.1f}M ({E / P * d * 4 / 1e9:.1f} GB) | {comm_bytes / 1e6:.3g} | "
              f"{comm_s * 1e3:.3g} | {compute_s * 1e3:.3g} | {steps} | "
              f"{steps * (comm_s + compute_s) / 60:.1f} |")


if __name__ == "__main__":
    main()
