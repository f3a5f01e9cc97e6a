"""sgrad.fasttext trains and predicts in-process through libsgrad_models: a model trained
from Python is the file a direct `sgrad-fasttext supervised|skipgram` run with the same
flags writes (byte for byte), predict gives what `predict-prob` prints for the same lines,
test what `test` prints, nn what `nn` prints; labels and words as counted from the corpus
here; save/load keep the predictions; bad arguments raise ValueError naming them before
training, a missing input FileNotFoundError, a damaged model FormatError naming the path;
Ctrl-C stops training. The comparisons with the program skip where it is not built."""
import collections
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import sgrad
from programs import program
from sgrad import fasttext

FLAGS = dict(lr=0.5, dim=8, epoch=4, wordNgrams=2, bucket=1000, minCount=2, thread=2,
             seed=3, verbose=0)




def make_lines(r, n):
    # three labels, each with its own 5 words, a few shared words and rare noise words
    lines = []
    for _ in range(n):
        c = r.integers(3)
        words = [f"c{c}w{w}" for w in r.integers(0, 5, 4)] + [f"s{w}" for w in r.integers(0, 3, 2)]
        if r.random() < 0.2:
            words.append(f"rare{r.integers(10 ** 6)}")
        r.shuffle(words)
        labels = [f"__label__c{c}"] + (["__label__c9"] if r.random() < 0.1 else [])
        lines.append(" ".join(labels + words))
    return lines


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ft")
    r = np.random.default_rng(11)
    train, test = make_lines(r, 600), make_lines(r, 100)
    (d / "train.txt").write_text("\n".join(train) + "\n")
    (d / "test.txt").write_text("\n".join(test) + "\n")
    texts = [" ".join(w for w in line.split() if not w.startswith("__label__"))
             for line in test[:40]] + ["unknownword", "c1w0 c1w1", ""]
    (d / "texts.txt").write_text("\n".join(texts) + "\n")
    model = fasttext.train_supervised(input=str(d / "train.txt"), **FLAGS)
    model.save_model(str(d / "model.bin"))
    return d, train, texts, model


def direct(*args, stdin=None):
    return subprocess.run([program("sgrad-fasttext", "SGRAD_FASTTEXT"), *map(str, args)], input=stdin, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode()


def test_trained_model_is_a_direct_runs_file(data, tmp_path):
    d, _, _, model = data
    direct("supervised", "-input", d / "train.txt", "-output", tmp_path / "m", "-lr", 0.5,
           "-dim", 8, "-epoch", 4, "-wordNgrams", 2, "-bucket", 1000, "-minCount", 2,
           "-thread", 1, "-seed", 3, "-verbose", 0)
    assert (d / "model.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()


@pytest.mark.parametrize("k", [1, 2, 4, -1])
def test_predict_is_predict_prob(data, k):
    d, _, texts, model = data
    out = direct("predict-prob", d / "model.bin", d / "texts.txt", k).split("\n")[:-1]
    labels, probs = model.predict(texts, k=k)
    assert len(out) == len(texts) == len(labels) == len(probs)
    for line, labs, ps in zip(out, labels, probs):
        tok = line.split()
        assert labs == tuple(tok[0::2])
        assert ps.dtype == np.float64
        np.testing.assert_allclose(ps, [float(p) for p in tok[1::2]], rtol=1e-5)  # %g: 6 digits
        assert list(ps) == sorted(ps, reverse=True)
    one_labels, one_probs = model.predict(texts[0], k=k)
    assert one_labels == labels[0] and np.array_equal(one_probs, probs[0])
    assert one_labels[0].startswith("__label__c")
    kept, kept_p = model.predict(texts[0], k=-1, threshold=0.01)
    all_labels, _ = model.predict(texts[0], k=-1)
    assert sorted(all_labels) == sorted(model.get_labels())
    assert all(p >= 0.01 for p in kept_p) and kept == all_labels[:len(kept)]


def test_test_is_the_programs(data):
    d, _, _, model = data
    for k in (1, 2):
        out = dict(line.split("\t") for line in direct("test", d / "model.bin", d / "test.txt", k)
                   .splitlines())
        n, p, r = model.test(str(d / "test.txt"), k=k)
        assert n == int(out["N"]) == 100
        assert float(f"{p:.3g}") == float(out[f"P@{k}"]) and float(f"{r:.3g}") == float(out[f"R@{k}"])
    assert model.test(str(d / "test.txt"))[1] > 0.9  # the topics separate
    per = model.test_label(str(d / "test.txt"))
    assert set(per) == set(model.get_labels())
    assert per["__label__c0"]["precision"] > 0.9 and per["__label__c0"]["recall"] > 0.9


def test_labels_and_words_as_counted_here(data):
    _, train, _, model = data
    words, labels = collections.Counter(), collections.Counter()
    for line in train:
        for tok in line.split():
            (labels if tok.startswith("__label__") else words)[tok] += 1
    words["</s>"] = len(train)
    kept = {w for w, c in words.items() if c >= FLAGS["minCount"]}
    got = model.get_words()
    assert set(got) == kept and len(got) == len(kept)
    assert all(words[a] >= words[b] for a, b in zip(got, got[1:]))
    got, counts = model.get_labels(include_freq=True)
    assert set(got) == set(labels) and list(counts) == [labels[g] for g in got]
    assert all(labels[a] >= labels[b] for a, b in zip(got, got[1:]))
    assert model.get_dimension() == 8
    assert model.get_input_matrix().shape == (len(kept) + 1000, 8)
    assert model.get_output_matrix().shape == (len(labels), 8)
    v = model.get_word_vector("c1w0")
    assert v.shape == (8,) and v.dtype == np.float32 and np.any(v)
    assert model.get_sentence_vector("c1w0 c1w1").shape == (8,)


def test_save_and_load_keep_predictions(data, tmp_path):
    _, _, texts, model = data
    model.save_model(str(tmp_path / "saved.bin"))
    back = fasttext.load_model(str(tmp_path / "saved.bin"))
    os.remove(tmp_path / "saved.bin")  # the loaded model is held in memory
    assert back.predict(texts, k=2)[0] == model.predict(texts, k=2)[0]
    assert back.get_labels() == model.get_labels()


def test_word_vectors_are_the_programs(data, tmp_path):
    d, _, _, _ = data
    kw = dict(dim=8, epoch=2, minCount=1, bucket=1000, thread=2, seed=2, verbose=0)
    model = fasttext.train_unsupervised(input=str(d / "train.txt"), model="skipgram", **kw)
    direct("skipgram", "-input", d / "train.txt", "-output", tmp_path / "m", "-dim", 8,
           "-epoch", 2, "-minCount", 1, "-bucket", 1000, "-thread", 2, "-seed", 2,
           "-verbose", 0)
    model.save_model(str(tmp_path / "py.bin"))
    assert (tmp_path / "py.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()
    nn = model.get_nearest_neighbors("c1w0", k=3)
    out = direct("nn", tmp_path / "m.bin", 3, stdin=b"c1w0\n")
    assert [w for _, w in nn] == [line.split()[0] for line in
                                  out.split("Query word? ")[1].strip().splitlines()]
    assert all(isinstance(s, float) for s, _ in nn) and "c1w0" not in [w for _, w in nn]
    an = model.get_analogies("c1w0", "c2w0", "c2w1", k=3)
    assert len(an) == 3 and not {"c1w0", "c2w0", "c2w1"} & {w for _, w in an}
    words, counts = model.get_words(include_freq=True)
    assert words[0] == "</s>" and counts[0] == 600
    back = fasttext.load_model(str(tmp_path / "py.bin"))
    assert np.array_equal(back.get_word_vector("c1w0"), model.get_word_vector("c1w0"))
    assert np.array_equal(back.get_word_vector("c1w0zz"), model.get_word_vector("c1w0zz"))
    with pytest.raises(ValueError, match="not a classifier"):
        model.predict("c1w0")


def test_bad_input_raises_before_training(data, tmp_path):
    d, _, _, model = data
    train = str(d / "train.txt")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="no token"):
        fasttext.train_supervised(input=str(tmp_path / "empty.txt"), verbose=0)
    for kw, name in [(dict(loss="bogus"), "loss"), (dict(dim=0), "dim"), (dict(lr=-1), "lr"),
                     (dict(epoch=0), "epoch"), (dict(wordNgrams=0), "wordNgrams")]:
        with pytest.raises(ValueError, match=name):
            fasttext.train_supervised(input=train, verbose=0, **kw)
    with pytest.raises(ValueError, match="model"):
        fasttext.train_unsupervised(input=train, model="bogus", verbose=0)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        fasttext.train_supervised(input=str(tmp_path / "missing.txt"), verbose=0)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        model.test(str(tmp_path / "missing.txt"))
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        fasttext.load_model(str(tmp_path / "missing.bin"))
    with pytest.raises(ValueError, match="one line at a time"):
        model.predict("two\nlines")
    bad = tmp_path / "bad.bin"
    bad.write_bytes((d / "train.txt").read_bytes())
    with pytest.raises(sgrad.FormatError, match="bad.bin"):
        fasttext.load_model(str(bad))
    other = tmp_path / "other.safetensors"
    sgrad.save_checkpoint(str(other), {"W": sgrad.from_numpy(np.zeros(3))})
    with pytest.raises(sgrad.FormatError, match="other.safetensors"):
        fasttext.load_model(str(other))
    assert sorted(os.listdir(tmp_path)) == ["bad.bin", "empty.txt", "other.safetensors"]


def test_ctrl_c_stops_training(data):
    d = data[0]
    big = d / "big.txt"
    big.write_text((d / "train.txt").read_text() * 20)

    # Ctrl-C from another thread while C trains with the GIL released
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            fasttext.train_supervised(input=str(big), epoch=1000, dim=8, thread=2, verbose=0)
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 30
    model = info.value.model  # the model of the last step
    assert model.predict("c1w0 c1w1")[0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
