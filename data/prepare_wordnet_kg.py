#!/usr/bin/env python3
"""Builds data/wordnet-kg/, the knowledge graph that sgrad-kge's demo and tests train on.

Source: WordNet 3.0's database files as Debian's package wordnet-base installs them
(/usr/share/wordnet/data.noun, data.verb, data.adj, data.adv; format wndb(5WN)).

Entities are synsets, named `<first lemma>.<ss_type>.<8-digit offset>` (the lemma
lowercased, an adjective's syntactic marker such as "(a)" dropped), e.g. dog.n.02084071;
ss_type is WordNet's letter (n, v, a, s for an adjective satellite, r), and the offset is
unique within its file, so names are unique. Relations are the 11 of the WN18RR
benchmark, each read on the head synset's line:

    @  _hypernym                      @i _instance_hypernym
    %m _member_meronym                %p _has_part
    +  _derivationally_related_form   ;c _synset_domain_topic_of
    -u _member_of_domain_usage        -r _member_of_domain_region
    ^  _also_see                      $  _verb_group
    &  _similar_to

A pointer between two words (lexical) counts as one between their synsets; a triple that
several pointers give is kept once, and a synset's pointer to itself is dropped.

The full graph is larger than WN18RR, so the files hold a subgraph of about its size:
the triples whose two synsets both have degree (triples naming the synset, in the full
graph) at least K, K the value whose triple count is closest to WN18RR's 93,003; the
entities are the synsets these triples name. The sorted triples are shuffled by
random.Random(SEED); the first 3,000 are valid, the next 3,000 test, the rest train; each
file is sorted. Entities of valid and test need not occur in train (the trainer counts
those as unseen).

Output: train.tsv.xz, valid.tsv.xz, test.tsv.xz (head<TAB>relation<TAB>tail lines) and
LICENSE (WordNet 3.0's licence, from the data files' header). Deterministic: the same
bytes on every run. Standard library only. Run from anywhere:
    python3 data/prepare_wordnet_kg.py [--wordnet /usr/share/wordnet] [--output DIR]
"""
import argparse
import collections
import lzma
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "wordnet-kg")
SEED = 36
N_VALID = 3000
N_TEST = 3000
TARGET_TRIPLES = 93003  # WN18RR's triple count (train, valid and test)
FILES = ("noun", "verb", "adj", "adv")
RELATIONS = {
    "@": "_hypernym",
    "@i": "_instance_hypernym",
    "%m": "_member_meronym",
    "%p": "_has_part",
    "+": "_derivationally_related_form",
    ";c": "_synset_domain_topic_of",
    "-u": "_member_of_domain_usage",
    "-r": "_member_of_domain_region",
    "^": "_also_see",
    "$": "_verb_group",
    "&": "_similar_to",
}
ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")


def file_of(pos):
    """The data file holding a synset of this pointer pos (satellites live in data.adj)."""
    return {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}[pos]


def parse_line(line):
    """One wndb(5WN) synset line -> (offset, ss_type, first lemma, [(symbol, offset, pos)]).

    synset_offset lex_filenum ss_type w_cnt(2 hex) [word lex_id]... p_cnt(3 dec)
    [pointer_symbol synset_offset pos source/target]... [frames] | gloss"""
    f = line.split(" ")
    offset, ss_type, w_cnt = f[0], f[2], int(f[3], 16)
    lemma = ADJ_MARKER.sub("", f[4]).lower()
    p = 4 + 2 * w_cnt
    p_cnt = int(f[p])
    ptrs = []
    for i in range(p_cnt):
        sym, off, pos, _ = f[p + 1 + 4 * i: p + 5 + 4 * i]
        ptrs.append((sym, off, pos))
    return offset, ss_type, lemma, ptrs


def read_wordnet(wndir):
    """Names of every synset, keyed (file, offset), and the deduplicated triples."""
    names, pointers = {}, []
    for name in FILES:
        with open(os.path.join(wndir, "data." + name), encoding="latin-1") as fh:
            for line in fh:
                if line.startswith("  "):  # the licence header
                    continue
                offset, ss_type, lemma, ptrs = parse_line(line)
                names[(name, offset)] = f"{lemma}.{ss_type}.{offset}"
                for sym, off, pos in ptrs:
                    if sym in RELATIONS:
                        pointers.append(((name, offset), RELATIONS[sym], (file_of(pos), off)))
    triples = set()
    for h, r, t in pointers:
        if h != t:
            triples.add((names[h], r, names[t]))
    return names, sorted(triples)


def degree_subgraph(triples):
    """(K, the triples among the synsets of degree >= K), K as the module docstring says."""
    degree = collections.Counter()
    for h, _, t in triples:
        degree[h] += 1
        degree[t] += 1
    best = None
    for k in range(1, max(degree.values()) + 1):  # the kept triples shrink as k grows
        sub = [x for x in triples if degree[x[0]] >= k and degree[x[2]] >= k]
        if best is None or abs(len(sub) - TARGET_TRIPLES) < abs(len(best[1]) - TARGET_TRIPLES):
            best = (k, sub)
        if len(sub) < TARGET_TRIPLES:
            break
    return best


def report(label, triples):
    """Prints the entity, triple and per-relation counts of triples to stderr."""
    ents = {x[0] for x in triples} | {x[2] for x in triples}
    rels = collections.Counter(x[1] for x in triples)
    print(f"{label}: {len(ents)} entities, {len(triples)} triples", file=sys.stderr)
    for r in sorted(rels, key=lambda r: (-rels[r], r)):
        print(f"  {r}: {rels[r]}", file=sys.stderr)


def license_text(wndir):
    lines = []
    with open(os.path.join(wndir, "data.noun"), encoding="latin-1") as fh:
        for line in fh:
            if not line.startswith("  "):
                break
            lines.append(line[2:].split(" ", 1)[1].rstrip() if " " in line[2:] else "")
    return ("The triples of this directory are derived from WordNet 3.0 (Princeton University),\n"
            "whose licence follows as its data files state it.\n\n"
            + "\n".join(lines).strip("\n") + "\n")


def write_xz(path, triples):
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write("".join(f"{h}\t{r}\t{t}\n" for h, r, t in sorted(triples)).encode("utf-8"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wordnet", default="/usr/share/wordnet", help="wordnet-base's data files")
    ap.add_argument("--output", default=OUT, help="the directory written (default: %(default)s)")
    args = ap.parse_args()
    names, full = read_wordnet(args.wordnet)
    print(f"WordNet: {len(names)} synsets", file=sys.stderr)
    report("full graph", full)
    k, sub = degree_subgraph(full)
    report(f"subgraph (degree >= {k})", sub)
    order = list(sub)
    random.Random(SEED).shuffle(order)
    splits = {"valid": order[:N_VALID], "test": order[N_VALID:N_VALID + N_TEST],
              "train": order[N_VALID + N_TEST:]}
    os.makedirs(args.output, exist_ok=True)
    train_ents = {x[0] for x in splits["train"]} | {x[2] for x in splits["train"]}
    for name, part in splits.items():
        path = os.path.join(args.output, name + ".tsv.xz")
        write_xz(path, part)
        ents = {x[0] for x in part} | {x[2] for x in part}
        unseen = sum(1 for h, _, t in part if h not in train_ents or t not in train_ents)
        print(f"{path}: {len(part)} triples, {len(ents)} entities, {unseen} triples naming an"
              f" entity not in train, {os.path.getsize(path)} bytes", file=sys.stderr)
    with open(os.path.join(args.output, "LICENSE"), "w", encoding="utf-8") as f:
        f.write(license_text(args.wordnet))


if __name__ == "__main__":
    main()
