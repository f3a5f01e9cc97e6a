#!/usr/bin/env python3
"""Builds data/demo-corpus.txt.xz, the corpus that `make demo` trains on.

Sources (both Debian packages; see data/README.md for their licences):
  r-cran-janeaustenr  Jane Austen's six novels, stored as R character vectors in
                      R/site-library/janeaustenr/data/Rdata.rdb
  bible-kjv-text      the King James Bible, read out with the `bible` program of bible-kjv

Output: one paragraph (Austen) or one verse (KJV) per line, lowercased, every character
outside [a-z0-9] turned into a space (accents folded first), words separated by one space.
Needs python3 (standard library only), apt-get, dpkg and xz. Run from anywhere:
    python3 data/prepare_demo_corpus.py
"""
import glob
import lzma
import os
import re
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "demo-corpus.txt.xz")
NON_TOKEN = re.compile(r"[^a-z0-9]+")


def tokens(text):
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return NON_TOKEN.sub(" ", text.lower()).split()


def fetch(workdir, packages):
    """apt-get download + dpkg -x of each package into workdir/root."""
    root = os.path.join(workdir, "root")
    subprocess.run(["apt-get", "download"] + packages, cwd=workdir, check=True)
    for deb in glob.glob(os.path.join(workdir, "*.deb")):
        subprocess.run(["dpkg", "-x", deb, root], check=True)
    return root


def r_string_vectors(rdb_path):
    """Yields every character vector in an R lazy-load database (.rdb).

    The file is a sequence of records: a 4-byte big-endian length, then a zlib stream of
    an R serialization (format 'X', version 3) whose top object, for this package, is a
    STRSXP: an int count, then per element an int flags word and an int byte length (-1
    for NA) followed by the UTF-8 bytes."""
    data = open(rdb_path, "rb").read()
    off = 0
    while off < len(data):
        z = zlib.decompressobj()
        blob = z.decompress(data[off + 4:])
        off = len(data) - len(z.unused_data)
        if blob[:2] != b"X\n":
            raise ValueError("not an XDR serialization")
        version = struct.unpack(">I", blob[2:6])[0]
        p = 14  # 'X\n', version, writer version, minimal reader version
        if version == 3:
            enc_len = struct.unpack(">I", blob[p:p + 4])[0]
            p += 4 + enc_len
        flags, n = struct.unpack(">II", blob[p:p + 8])
        p += 8
        if flags & 0xFF != 16:  # STRSXP
            continue
        out = []
        for _ in range(n):
            _, length = struct.unpack(">Ii", blob[p:p + 8])
            p += 8
            if length < 0:
                out.append("")
                continue
            out.append(blob[p:p + length].decode("utf-8"))
            p += length
        yield out


def austen_paragraphs(root):
    rdb = glob.glob(os.path.join(root, "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"))[0]
    for lines in r_string_vectors(rdb):
        para = []
        for line in lines + [""]:
            if line.strip():
                para.append(line)
            elif para:
                yield " ".join(para)
                para = []


def kjv_verses(root):
    prog = os.path.join(root, "usr/bin/bible")
    text = subprocess.run([prog, "-p", os.path.join(root, "usr/lib"), "-l100000",
                           "gen1:1-rev22:21"], check=True, capture_output=True,
                          text=True).stdout
    verse = re.compile(r"^\s+\d+\s+(.*)$")
    for line in text.splitlines():
        m = verse.match(line)
        if m:  # book/chapter headings ("Genesis 1") and blank lines are skipped
            yield m.group(1)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = fetch(tmp, ["r-cran-janeaustenr", "bible-kjv", "bible-kjv-text"])
        lines, words = [], 0
        for source in (austen_paragraphs(root), kjv_verses(root)):
            for text in source:
                toks = tokens(text)
                if toks:
                    lines.append(" ".join(toks))
                    words += len(toks)
    with lzma.open(OUT, "wt", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write("\n".join(lines) + "\n")
    print(f"{OUT}: {len(lines)} lines, {words} words, {os.path.getsize(OUT)} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
