"""sgrad.Word2Vec runs sgrad-w2v: its vectors are bitwise those of a direct run with the
same flags (read back by an independent numpy parser of the binary format), and gensim
loads what save_word2vec_format writes. Skipped where sgrad-w2v is not built."""
import os
import subprocess

import numpy as np
import pytest

import sgrad
from sgrad import word2vec


def program():
    try:
        return word2vec._find_program()
    except FileNotFoundError:
        pytest.skip("sgrad-w2v is not built (SGRAD_BUILD_TOOLS=OFF) and not on PATH")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    # 8 topics of 6 words; each line from one topic
    r = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("w2v") / "corpus.txt"
    lines = []
    for _ in range(800):
        t = r.integers(8)
        lines.append(" ".join(f"t{t}w{w}" for w in r.integers(0, 6, 8)))
    path.write_text("\n".join(lines) + "\n")
    return path


def read_binary(path):
    """word2vec's binary format, parsed here without the library."""
    data = open(path, "rb").read()
    head, _, rest = data.partition(b"\n")
    V, D = map(int, head.split())
    words, vecs, pos = [], np.empty((V, D), np.float32), 0
    for i in range(V):
        while rest[pos:pos + 1] in (b"\n", b" "):
            pos += 1
        sp = rest.index(b" ", pos)
        words.append(rest[pos:sp].decode())
        vecs[i] = np.frombuffer(rest[sp + 1:sp + 1 + 4 * D], "<f4")
        pos = sp + 1 + 4 * D
    return words, vecs


@pytest.mark.parametrize("sg", [1, 0], ids=["skipgram", "cbow"])
def test_vectors_are_bitwise_a_direct_runs(corpus, tmp_path, sg):
    prog = program()
    kw = dict(vector_size=16, window=3, negative=4, sample=1e-3, min_count=2, epochs=3,
              sg=sg, workers=2, seed=11)
    model = sgrad.Word2Vec(corpus_file=str(corpus), **kw)
    direct = tmp_path / "direct.bin"
    subprocess.run([prog, "-train", str(corpus), "-output", str(direct), "-binary", "1",
                    "-size", "16", "-window", "3", "-negative", "4", "-sample", "1e-3",
                    "-min-count", "2", "-iter", "3", "-cbow", str(1 - sg), "-threads", "2",
                    "-seed", "11"], check=True, stderr=subprocess.DEVNULL)
    words, vecs = read_binary(direct)
    assert model.wv.index_to_key == words
    assert model.wv.vectors.tobytes() == vecs.tobytes()
    saved = tmp_path / "saved.bin"
    model.wv.save_word2vec_format(str(saved), binary=True)
    assert saved.read_bytes() == direct.read_bytes()
    # one worker gives the same vectors (deterministic mode)
    one = sgrad.Word2Vec(corpus_file=str(corpus), **dict(kw, workers=1))
    assert one.wv.vectors.tobytes() == vecs.tobytes()


def test_keyed_vectors_queries_and_gensim_loads_them(corpus, tmp_path):
    program()
    model = sgrad.Word2Vec(corpus_file=str(corpus), vector_size=16, window=3, min_count=2,
                           epochs=5, sample=0, workers=1, seed=3)
    wv = model.wv
    a, b = wv["t0w0"].astype(np.float64), wv["t0w1"].astype(np.float64)
    assert wv.similarity("t0w0", "t0w1") == pytest.approx(
        a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-12)
    top = wv.most_similar("t0w0", topn=5)
    assert len(top) == 5 and "t0w0" not in [w for w, _ in top]
    sims = [s for _, s in top]
    assert sims == sorted(sims, reverse=True)
    text = tmp_path / "v.txt"
    wv.save_word2vec_format(str(text))
    back = sgrad.KeyedVectors.load_word2vec_format(str(text))
    assert back.vectors.tobytes() == wv.vectors.tobytes()  # 9 digits: f32 exactly
    gensim = pytest.importorskip("gensim.models")
    g = gensim.KeyedVectors.load_word2vec_format(str(text), binary=False)
    assert list(g.index_to_key) == wv.index_to_key
    np.testing.assert_array_equal(g.vectors, wv.vectors)
    assert [w for w, _ in g.most_similar("t0w0", topn=5)] == [w for w, _ in top]


def test_a_failing_run_raises_with_the_programs_message(tmp_path):
    program()
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(RuntimeError, match="(?s)sgrad-w2v failed.*vocabulary has 0 words"):
        sgrad.Word2Vec(corpus_file=str(tmp_path / "empty.txt"))
    assert os.listdir(tmp_path) == ["empty.txt"]
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        sgrad.Word2Vec(corpus_file=str(tmp_path / "missing.txt"))
