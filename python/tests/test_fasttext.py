"""sgrad.fasttext runs sgrad-fasttext: a model trained from Python is the file a direct
`sgrad-fasttext supervised` run with the same flags writes (byte for byte), predict gives
what `predict-prob` prints for the same lines (one program run for many texts), test
what `test` prints; labels and words as counted from the corpus here; save/load keep the
predictions; bad input raises with the program's message. Skipped where sgrad-fasttext
is not built."""
import collections
import os
import subprocess

import numpy as np
import pytest

import sgrad
from sgrad import fasttext

FLAGS = dict(lr=0.5, dim=8, epoch=4, wordNgrams=2, bucket=1000, minCount=2, thread=2,
             seed=3, verbose=0)


def program():
    try:
        return fasttext._find_program()
    except FileNotFoundError:
        pytest.skip("sgrad-fasttext is not built (SGRAD_BUILD_TOOLS=OFF) and not on PATH")


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
    program()
    d = tmp_path_factory.mktemp("ft")
    r = np.random.default_rng(11)
    train, test = make_lines(r, 600), make_lines(r, 100)
    (d / "train.txt").write_text("\n".join(train) + "\n")
    (d / "test.txt").write_text("\n".join(test) + "\n")
    texts = [" ".join(w for w in line.split() if not w.startswith("__label__"))
             for line in test[:40]] + ["unknownword", "c1w0 c1w1", ""]
    (d / "texts.txt").write_text("\n".join(texts) + "\n")
    model = fasttext.train_supervised(input=str(d / "train.txt"), **FLAGS)
    return d, train, texts, model


def direct(*args, stdin=None):
    return subprocess.run([program(), *map(str, args)], input=stdin, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout.decode()


def test_trained_model_is_a_direct_runs_file(data, tmp_path):
    d, _, _, model = data
    direct("supervised", "-input", d / "train.txt", "-output", tmp_path / "m", "-lr", 0.5,
           "-dim", 8, "-epoch", 4, "-wordNgrams", 2, "-bucket", 1000, "-minCount", 2,
           "-thread", 1, "-seed", 3, "-verbose", 0)
    model.save_model(str(tmp_path / "py.bin"))
    assert (tmp_path / "py.bin").read_bytes() == (tmp_path / "m.bin").read_bytes()


@pytest.mark.parametrize("k", [1, 2, 4])
def test_predict_is_predict_prob(data, k):
    d, _, texts, model = data
    out = direct("predict-prob", model.path, d / "texts.txt", k).split("\n")[:-1]
    labels, probs = model.predict(texts, k=k)
    assert len(out) == len(texts) == len(labels) == len(probs)
    for line, labs, ps in zip(out, labels, probs):
        tok = line.split()
        assert labs == tuple(tok[0::2])
        assert ps.dtype == np.float64 and list(ps) == [float(p) for p in tok[1::2]]
        assert list(ps) == sorted(ps, reverse=True)
    one_labels, one_probs = model.predict(texts[0], k=k)
    assert one_labels == labels[0] and np.array_equal(one_probs, probs[0])
    assert one_labels[0].startswith("__label__c")
    all_labels, _ = model.predict(texts[0], k=-1)
    assert sorted(all_labels) == sorted(model.get_labels())
    kept, kept_p = model.predict(texts[0], k=-1, threshold=0.01)
    assert all(p >= 0.01 for p in kept_p) and kept == all_labels[:len(kept)]


def test_test_is_the_programs(data):
    d, _, _, model = data
    for k in (1, 2):
        out = dict(line.split("\t") for line in direct("test", model.path, d / "test.txt", k)
                   .splitlines())
        n, p, r = model.test(str(d / "test.txt"), k=k)
        assert (n, p, r) == (int(out["N"]), float(out[f"P@{k}"]), float(out[f"R@{k}"]))
        assert n == 100 and 0 < p <= 1 and 0 < r <= 1
    assert model.test(str(d / "test.txt"))[1] > 0.9  # the topics separate


def test_labels_and_words_as_counted_here(data):
    _, train, _, model = data
    words, labels = collections.Counter(), collections.Counter()
    for line in train:
        for tok in line.split():
            (labels if tok.startswith("__label__") else words)[tok] += 1
    words["</s>"] = len(train)
    kept = {w for w, c in words.items() if c >= FLAGS["minCount"]}
    assert set(model.get_words()) == kept and len(model.get_words()) == len(kept)
    got = model.get_words()
    assert all(words[a] >= words[b] for a, b in zip(got, got[1:]))
    assert set(model.get_labels()) == set(labels)
    got = model.get_labels()
    assert all(labels[a] >= labels[b] for a, b in zip(got, got[1:]))


def test_save_and_load_keep_predictions(data, tmp_path):
    _, _, texts, model = data
    model.save_model(str(tmp_path / "saved.bin"))
    back = fasttext.load_model(str(tmp_path / "saved.bin"))
    os.remove(tmp_path / "saved.bin")  # the loaded model holds its own copy
    assert back.predict(texts, k=2)[0] == model.predict(texts, k=2)[0]
    assert back.get_labels() == model.get_labels()


def test_bad_input_raises_with_the_programs_message(data, tmp_path):
    d, _, _, model = data
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(RuntimeError, match="sgrad-fasttext"):
        fasttext.train_supervised(input=str(tmp_path / "empty.txt"), verbose=0)
    with pytest.raises(RuntimeError, match="-loss"):
        fasttext.train_supervised(input=str(d / "train.txt"), loss="bogus", verbose=0)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        fasttext.train_supervised(input=str(tmp_path / "missing.txt"), verbose=0)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        model.test(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="one line at a time"):
        model.predict("two\nlines")
    bad = tmp_path / "bad.bin"
    bad.write_bytes((d / "train.txt").read_bytes())
    with pytest.raises(sgrad.FormatError):
        fasttext.load_model(str(bad))
    other = tmp_path / "other.safetensors"
    sgrad.save_checkpoint(str(other), {"W": sgrad.from_numpy(np.zeros(3))})
    with pytest.raises(ValueError, match="not an sgrad-fasttext model"):
        fasttext.load_model(str(other))
    assert sorted(os.listdir(tmp_path)) == ["bad.bin", "empty.txt", "other.safetensors"]


def test_many_texts_are_one_program_run(data, tmp_path):
    d, _, texts, model = data
    calls = tmp_path / "calls"
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >>{calls}\nexec {program()} "$@"\n')
    wrapper.chmod(0o755)
    m = fasttext.train_supervised(input=str(d / "train.txt"), program=str(wrapper), **FLAGS)
    labels, probs = m.predict(texts, k=2)
    want_labels, want_probs = model.predict(texts, k=2)
    assert labels == want_labels and all(map(np.array_equal, probs, want_probs))
    assert calls.read_text().split() == ["supervised", "predict-prob"]
