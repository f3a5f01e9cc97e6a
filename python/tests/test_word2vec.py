"""sgrad.Word2Vec trains in-process through libsgrad_models: with corpus_file its vectors
are bitwise those of a direct `sgrad-w2v -train` run with the equivalent flags (read back
by an independent numpy parser of the binary format), sentences holding the file's lines
give the same vectors as the file, build_vocab/train/callbacks/loss/save/load behave as
gensim's, arguments sgrad does not honour raise NotImplementedError, bad ones ValueError
before training, and Ctrl-C stops training with the model usable. The comparisons with
the program skip where sgrad-w2v is not built."""
import os
import signal
import subprocess

import numpy as np
import pytest

import sgrad
from programs import program
from sgrad import word2vec




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


def sentences_of(path):
    return [line.split() for line in open(path)]


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


KW = dict(vector_size=16, window=3, negative=4, sample=1e-3, min_count=2, epochs=3,
          workers=2, seed=11)


@pytest.mark.parametrize("sg,hs", [(1, 0), (0, 0), (1, 1)], ids=["skipgram", "cbow", "sg-hs"])
def test_vectors_are_bitwise_a_direct_runs(corpus, tmp_path, sg, hs):
    prog = program("sgrad-w2v", "SGRAD_W2V")
    model = sgrad.Word2Vec(corpus_file=str(corpus), sg=sg, hs=hs, **KW)
    direct = tmp_path / "direct.bin"
    subprocess.run([prog, "-train", str(corpus), "-output", str(direct), "-binary", "1",
                    "-size", "16", "-window", "3", "-negative", "4", "-hs", str(hs),
                    "-sample", "1e-3", "-min-count", "2", "-iter", "3", "-cbow", str(1 - sg),
                    "-threads", "2", "-seed", "11", "-alpha", "0.025"],
                   check=True, stderr=subprocess.DEVNULL)
    words, vecs = read_binary(direct)
    assert model.wv.index_to_key == words
    assert model.wv.vectors.tobytes() == vecs.tobytes()
    saved = tmp_path / "saved.bin"
    model.wv.save_word2vec_format(str(saved), binary=True)
    assert saved.read_bytes() == direct.read_bytes()
    # one worker gives the same vectors (deterministic mode)
    one = sgrad.Word2Vec(corpus_file=str(corpus), sg=sg, hs=hs, **dict(KW, workers=1))
    assert one.wv.vectors.tobytes() == vecs.tobytes()


@pytest.mark.parametrize("sg", [1, 0], ids=["skipgram", "cbow"])
def test_sentences_train_as_the_file_holding_them(corpus, sg):
    from_file = sgrad.Word2Vec(corpus_file=str(corpus), sg=sg, **KW)
    from_list = sgrad.Word2Vec(sentences=sentences_of(corpus), sg=sg, **KW)
    assert from_list.corpus_count == from_file.corpus_count == 800
    assert from_list.corpus_total_words == from_file.corpus_total_words == 6400
    assert from_list.wv.index_to_key == from_file.wv.index_to_key
    assert from_list.wv.vectors.tobytes() == from_file.wv.vectors.tobytes()


def test_sentences_cut_long_words_and_skip_empty_ones_as_the_file_reader(tmp_path):
    """Words past the reader's 99 bytes are cut as it cuts them (never inside a UTF-8
    character), non-ASCII words pass through, and an empty word (which no file can hold)
    is out of the vocabulary and skipped, so the vectors are the file's."""
    r = np.random.default_rng(3)
    long_a = "x" * 98 + "é" + "tail"  # the cut falls inside é: dropped whole
    vocab = [long_a, "ü" * 60, "naïve", "a", "b", "c"]
    lines = [[vocab[i] for i in r.integers(0, len(vocab), 7)] for _ in range(300)]
    path = tmp_path / "odd.txt"
    path.write_text("\n".join(" ".join(s) for s in lines) + "\n", encoding="utf-8")
    from_file = sgrad.Word2Vec(corpus_file=str(path), **KW)
    with_empty = [s[:3] + [""] + s[3:] for s in lines]
    from_list = sgrad.Word2Vec(sentences=with_empty, **KW)
    assert from_list.wv.index_to_key == from_file.wv.index_to_key
    assert "x" * 98 in from_list.wv.key_to_index
    assert from_list.wv.vectors.tobytes() == from_file.wv.vectors.tobytes()


def test_sentences_of_the_wrong_shape_are_refused_before_training():
    with pytest.raises(ValueError, match="holds a NUL"):
        sgrad.Word2Vec(sentences=[["a", "b"], ["c", "d\0e"]], min_count=1)
    with pytest.raises(TypeError, match="not a str"):
        sgrad.Word2Vec(sentences=["a b c"], min_count=1)
    with pytest.raises(TypeError):
        sgrad.Word2Vec(sentences=[["a", 3]], min_count=1)


def test_defaults_are_gensims():
    import inspect
    sig = inspect.signature(sgrad.Word2Vec)
    want = dict(vector_size=100, alpha=0.025, window=5, min_count=5, max_vocab_size=None,
                sample=1e-3, seed=1, workers=3, min_alpha=0.0001, sg=0, hs=0, negative=5,
                ns_exponent=0.75, cbow_mean=1, epochs=5, max_final_vocab=None,
                compute_loss=False)
    for name, value in want.items():
        assert sig.parameters[name].default == value, name
    gensim = pytest.importorskip("gensim.models")
    gsig = inspect.signature(gensim.Word2Vec)
    for name in want:
        assert gsig.parameters[name].default == sig.parameters[name].default, name


def test_keyed_vectors_queries_and_gensim_loads_them(corpus, tmp_path):
    model = sgrad.Word2Vec(corpus_file=str(corpus), vector_size=16, window=3, min_count=2,
                           epochs=5, sample=0, workers=1, seed=3, sg=1)
    wv = model.wv
    a, b = wv["t0w0"].astype(np.float64), wv["t0w1"].astype(np.float64)
    assert wv.similarity("t0w0", "t0w1") == pytest.approx(
        a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-12)
    top = wv.most_similar("t0w0", topn=5)
    assert len(top) == 5 and "t0w0" not in [w for w, _ in top]
    sims = [s for _, s in top]
    assert sims == sorted(sims, reverse=True)
    assert all(w.startswith("t0") for w, _ in top)
    by_vec = wv.most_similar(positive=[wv["t0w0"]], topn=3)
    assert by_vec[0][0] == "t0w0" and by_vec[0][1] == pytest.approx(1.0)
    assert wv.similar_by_vector(wv["t0w0"], topn=3) == by_vec
    assert wv.doesnt_match(["t0w0", "t0w1", "t0w2", "t5w3"]) == "t5w3"
    assert np.array_equal(wv.get_vector("t0w0"), wv["t0w0"])
    assert "t0w0" in wv and "nope" not in wv and wv.key_to_index["t0w0"] == wv.index_to_key.index("t0w0")
    with pytest.raises(KeyError, match="nope"):
        wv["nope"]
    restricted = wv.most_similar("t0w0", topn=100, restrict_vocab=10)
    assert all(wv.key_to_index[w] < 10 for w, _ in restricted)
    text = tmp_path / "v.txt"
    wv.save_word2vec_format(str(text))
    back = sgrad.KeyedVectors.load_word2vec_format(str(text))
    assert back.vectors.tobytes() == wv.vectors.tobytes()  # 9 digits: f32 exactly
    gensim = pytest.importorskip("gensim.models")
    g = gensim.KeyedVectors.load_word2vec_format(str(text), binary=False)
    assert list(g.index_to_key) == wv.index_to_key
    np.testing.assert_array_equal(g.vectors, wv.vectors)
    assert [w for w, _ in g.most_similar("t0w0", topn=5)] == [w for w, _ in top]
    assert g.doesnt_match(["t0w0", "t0w1", "t0w2", "t5w3"]) == "t5w3"


def test_evaluate_word_analogies(corpus, tmp_path):
    model = sgrad.Word2Vec(corpus_file=str(corpus), vector_size=16, window=3, min_count=2,
                           epochs=5, sample=0, workers=1, seed=3, sg=1)
    q = tmp_path / "questions.txt"
    q.write_text(": topics\nt0w0 t0w1 t1w0 t1w1\nt2w0 t2w1 t3w0 t3w1\n"
                 ": other\nt4w0 t4w1 t5w0 t5w1\nt4w0 t4w1 nope t5w1\n")
    score, sections = model.wv.evaluate_word_analogies(str(q))
    assert [s["section"] for s in sections] == ["topics", "other", "Total accuracy"]
    total = sections[-1]
    assert total["correct"] + total["incorrect"] == 3  # the question with "nope" not covered
    assert score == pytest.approx(total["correct"] / 3)
    loaded = sgrad.KeyedVectors.load_word2vec_format(_saved(model, tmp_path))
    assert loaded.evaluate_word_analogies(str(q)) == (score, sections)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        model.wv.evaluate_word_analogies(str(tmp_path / "missing.txt"))


def _saved(model, tmp_path):
    path = str(tmp_path / "kv.bin")
    model.wv.save_word2vec_format(path, binary=True)
    return path


class Recorder:
    def __init__(self):
        self.calls = []

    def on_train_begin(self, model):
        self.calls.append("train_begin")

    def on_epoch_begin(self, model):
        self.calls.append("epoch_begin")

    def on_epoch_end(self, model):
        self.calls.append(("epoch_end", model.get_latest_training_loss(),
                           model.wv.vectors.copy()))

    def on_train_end(self, model):
        self.calls.append("train_end")


def test_build_vocab_train_callbacks_loss_save_load(corpus, tmp_path):
    rec = Recorder()
    model = sgrad.Word2Vec(vector_size=16, window=3, min_count=2, epochs=3, workers=2,
                           seed=11, sg=1, negative=4, compute_loss=True, callbacks=[rec])
    sents = sentences_of(corpus)
    model.build_vocab(corpus_iterable=sents)
    assert model.corpus_count == 800 and len(model.wv) == 48
    model.train(corpus_iterable=sents, total_examples=model.corpus_count, epochs=model.epochs,
                callbacks=[rec])
    names = [c if isinstance(c, str) else c[0] for c in rec.calls]
    assert names == ["train_begin"] + ["epoch_begin", "epoch_end"] * 3 + ["train_end"]
    losses = [c[1] for c in rec.calls if c[0] == "epoch_end"]
    assert 0 < losses[0] < losses[1] < losses[2] == model.get_latest_training_loss()
    # the C API hands the tables out when the training call returns, not in between
    assert not np.any([c[2] for c in rec.calls if c[0] == "epoch_end"])
    assert np.any(model.wv.vectors)
    same = sgrad.Word2Vec(sentences=sents, **dict(KW, sg=1))
    assert same.wv.vectors.tobytes() == model.wv.vectors.tobytes()
    assert same.get_latest_training_loss() == 0.0  # compute_loss off
    path = tmp_path / "model.sgw2v"
    model.save(str(path))
    back = sgrad.Word2Vec.load(str(path))
    assert back.wv.index_to_key == model.wv.index_to_key
    assert back.wv.vectors.tobytes() == model.wv.vectors.tobytes()
    assert back.wv.most_similar("t0w0", topn=3) == model.wv.most_similar("t0w0", topn=3)
    assert (back.window, back.negative, back.sg, back.epochs, back.seed, back.min_count) == \
        (3, 4, 1, 3, 11, 2)
    assert (back.corpus_count, back.corpus_total_words) == (800, 6400)
    # continued training: in the process, and after save and load, the same bits
    trained = model.wv.vectors.copy()
    model.train(corpus_iterable=sents, total_examples=800, epochs=1, callbacks=[rec])
    back.train(corpus_iterable=sents, total_examples=800, epochs=1)
    assert model.epochs == back.epochs == 1
    assert back.wv.index_to_key == model.wv.index_to_key and len(model.wv) == 48
    assert not np.array_equal(trained, model.wv.vectors)
    assert back.wv.vectors.tobytes() == model.wv.vectors.tobytes()
    assert rec.calls[-4:-1] == ["train_begin", "epoch_begin", rec.calls[-2]] and \
        rec.calls[-1] == "train_end"


def test_continued_training_as_gensims_script(corpus, tmp_path):
    """gensim's own continued-training script: train on more sentences (some words new,
    skipped) for the model's epochs; the learning rate falls from alpha again; the corpus
    as a file or as sentences, in the process or after save and load, gives the same
    vectors."""
    sentences = sentences_of(corpus)[:400]
    more_sentences = [s + ["unseen"] for s in sentences_of(corpus)[400:]]
    model = sgrad.Word2Vec(sentences, min_count=1, vector_size=16, workers=2)
    words, first = list(model.wv.index_to_key), model.wv.vectors.copy()
    path = tmp_path / "first.sgw2v"
    model.save(str(path))
    model.train(more_sentences, total_examples=len(more_sentences), epochs=model.epochs)
    assert model.wv.index_to_key == words and "unseen" not in model.wv
    assert not np.array_equal(first, model.wv.vectors)
    steps = [r for r in model.training_log if r["steps"]]
    assert steps[0]["lr"] > 0.9 * model.alpha and model.training_log[-1]["progress"] == 1.0
    assert min(r["lr"] for r in steps) < 0.05 * model.alpha
    more_file = tmp_path / "more.txt"
    more_file.write_text("".join(" ".join(s) + "\n" for s in more_sentences))
    for source in ("sentences", "file"):
        back = sgrad.Word2Vec.load(str(path))
        assert back.wv.vectors.tobytes() == first.tobytes()
        if source == "file":
            back.train(corpus_file=str(more_file), total_examples=len(more_sentences),
                       epochs=back.epochs)
        else:
            back.train(more_sentences, total_examples=len(more_sentences), epochs=back.epochs)
        assert back.wv.vectors.tobytes() == model.wv.vectors.tobytes(), source
    # total_words instead: the same count, the same vectors
    again = sgrad.Word2Vec.load(str(path))
    again.train(more_sentences, total_words=sum(map(len, more_sentences)), epochs=5)
    assert again.wv.vectors.tobytes() == model.wv.vectors.tobytes()


def test_bad_arguments_are_refused_before_training(corpus, tmp_path):
    for kw, name in [(dict(vector_size=0), "vector_size"), (dict(window=0), "window"),
                     (dict(negative=-1), "negative"), (dict(sg=2), "sg"),
                     (dict(alpha=0), "alpha"), (dict(epochs=0), "epochs"),
                     (dict(sample=2.0), "sample"), (dict(workers=0), "workers"),
                     (dict(hs=0, negative=0), "negative=0 and hs=0")]:
        with pytest.raises(ValueError, match=name):
            sgrad.Word2Vec(corpus_file=str(tmp_path / "never-read.txt"), **kw)
    for kw in [dict(min_alpha=0.001), dict(max_vocab_size=100), dict(ns_exponent=0.5),
               dict(cbow_mean=0), dict(max_final_vocab=10), dict(shrink_windows=False)]:
        with pytest.raises(NotImplementedError, match=list(kw)[0]):
            sgrad.Word2Vec(corpus_file=str(corpus), **kw)
    with pytest.raises(TypeError, match="generator"):
        sgrad.Word2Vec(sentences=(s for s in sentences_of(corpus)))
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        sgrad.Word2Vec(corpus_file=str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="missing.model"):
        sgrad.Word2Vec.load(str(tmp_path / "missing.model"))
    bad = tmp_path / "damaged.model"
    bad.write_bytes(b"garbage\x00\x01 not a model")
    with pytest.raises(sgrad.FormatError, match="damaged.model"):
        sgrad.Word2Vec.load(str(bad))
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="vocabulary has 0 words"):
        sgrad.Word2Vec(corpus_file=str(tmp_path / "empty.txt"))
    m = sgrad.Word2Vec(min_count=1)
    with pytest.raises(RuntimeError, match="build vocabulary"):
        m.train(corpus_iterable=[["a"]], total_examples=1, epochs=5)
    m.build_vocab(corpus_iterable=[["a", "b"]])
    for kw, name in [(dict(epochs=None), "epochs"), (dict(epochs=0), "epochs"),
                     (dict(total_examples=None), "total_examples"),
                     (dict(start_alpha=-1.0), "start_alpha"), (dict(total_words=-1), "total_words")]:
        with pytest.raises(ValueError, match=name):
            m.train(corpus_iterable=[["a", "b"]], **dict(dict(total_examples=1, epochs=2), **kw))
    with pytest.raises(NotImplementedError, match="end_alpha"):
        m.train(corpus_iterable=[["a", "b"]], total_examples=1, epochs=2, end_alpha=0.01)
    # options the library refuses: epochs and alpha stay as they were
    epochs, alpha, m.workers = m.epochs, m.alpha, -1
    with pytest.raises(ValueError):
        m.train(corpus_iterable=[["a", "b"]], total_examples=1, epochs=epochs + 3, start_alpha=alpha / 2)
    assert (m.epochs, m.alpha) == (epochs, alpha)
    m.workers = 1
    with pytest.raises(NotImplementedError, match="update"):
        m.build_vocab(corpus_iterable=[["a"]], update=True)


def test_an_error_in_a_callback_or_the_corpus_stops_training(corpus):
    class Boom:
        def on_epoch_end(self, model):
            raise ZeroDivisionError("boom")
    with pytest.raises(ZeroDivisionError, match="boom"):
        sgrad.Word2Vec(corpus_file=str(corpus), callbacks=[Boom()], **KW)

    class Sentences:  # restartable; breaks in the second epoch
        def __init__(self):
            self.passes = 0

        def __iter__(self):
            self.passes += 1
            if self.passes == 3:  # build_vocab, epoch 1, then this
                raise OSError("corpus gone")
            return iter(sentences_of(corpus))
    with pytest.raises(OSError, match="corpus gone"):
        sgrad.Word2Vec(sentences=Sentences(), **dict(KW, sample=0))


def test_ctrl_c_stops_training_and_keeps_the_model(corpus):
    class Interrupt:
        def on_epoch_end(self, model):
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: a pending signal

    model = sgrad.Word2Vec(vector_size=16, min_count=2, epochs=50, workers=2, sg=1)
    model.build_vocab(corpus_file=str(corpus))
    before = model.wv.vectors.copy()
    with pytest.raises(KeyboardInterrupt):
        model.train(corpus_file=str(corpus), total_examples=model.corpus_count, epochs=50,
                    callbacks=[Interrupt()])
    assert model.training_log and model.training_log[-1]["epoch"] < 50  # stopped early
    assert not np.array_equal(before, model.wv.vectors)  # the last step's vectors
    assert model.wv.most_similar("t0w0", topn=2)  # usable


def test_ctrl_c_from_outside_stops_training(corpus):
    import threading
    import time
    sents = sentences_of(corpus) * 10
    model = sgrad.Word2Vec(vector_size=16, min_count=2, epochs=1000, workers=2, sg=1, alpha=0.005)
    model.build_vocab(corpus_iterable=sents)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.train(corpus_iterable=sents, total_examples=model.corpus_count, epochs=1000)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 30 and model.training_log[-1]["epoch"] < 1000
    assert np.any(model.wv.vectors) and model.wv.most_similar("t0w0", topn=2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
