"""Scripts written for gensim and for the ``fasttext`` module run on sgrad with only their
imports changed: each script's text is run as written (with gensim / fasttext where
installed, to show it is theirs) and with the import lines swapped for sgrad's, in a
fresh interpreter, and must print what it promises."""
import os
import subprocess
import sys

import numpy as np
import pytest

import sgrad

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)

GENSIM_SCRIPT = '''\
import sys
from gensim.models import Word2Vec
from gensim.models.callbacks import CallbackAny2Vec


class EpochLogger(CallbackAny2Vec):
    def __init__(self):
        self.epoch = 0
        self.losses = []

    def on_epoch_begin(self, model):
        self.epoch += 1

    def on_epoch_end(self, model):
        self.losses.append(model.get_latest_training_loss())


class Corpus:
    """Restartable: one pass per epoch over the file."""
    def __init__(self, path):
        self.path = path

    def __iter__(self):
        with open(self.path) as f:
            for line in f:
                yield line.split()


corpus_path, questions, out = sys.argv[1:4]
sentences = Corpus(corpus_path)
logger = EpochLogger()
model = Word2Vec(vector_size=16, window=3, min_count=2, sg=1, negative=5, epochs=4,
                 workers=2, seed=5, sample=0, compute_loss=True, callbacks=[logger])
model.build_vocab(sentences)
model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs,
            callbacks=[logger])
print("epochs", logger.epoch, "losses rise", logger.losses == sorted(logger.losses))
model.save(out)
model = Word2Vec.load(out)
vec = model.wv["t0w0"]
print("nearest to the vector", model.wv.most_similar(positive=[vec], topn=3)[0][0])
print("neighbours", all(w.startswith("t0") for w, _ in model.wv.most_similar("t0w0", topn=3)))
print("odd one out", model.wv.doesnt_match(["t0w0", "t0w1", "t0w2", "t5w3"]))
score, sections = model.wv.evaluate_word_analogies(questions)
print("analogies", 0.0 <= score <= 1.0, [s["section"] for s in sections])
print("vocabulary", len(model.wv.index_to_key), "t0w0" in model.wv.key_to_index)
'''
GENSIM_WANT = ["epochs 4 losses rise True", "nearest to the vector t0w0", "neighbours True",
               "odd one out t5w3", "analogies True ['topics', 'Total accuracy']",
               "vocabulary 48 True"]

FASTTEXT_SCRIPT = '''\
import sys
import fasttext

train, test, out = sys.argv[1:4]
model = fasttext.train_supervised(input=train, lr=0.5, epoch=10, wordNgrams=2, dim=10,
                                  bucket=10000, verbose=0, thread=2)
labels, probs = model.predict(["c1w0 c1w1 s0", "c2w3 c2w4"], k=2)
print("predict", labels[0][0], labels[1][0], len(probs[0]))
n, p, r = model.test(test)
print("test", n, p > 0.9, r > 0.9)
print("vector", model.get_word_vector("c1w0").shape)
print("labels", sorted(model.get_labels()))
vectors = fasttext.train_unsupervised(input=train, model="skipgram", dim=10, epoch=3,
                                      minCount=1, bucket=10000, verbose=0, thread=2)
nn = vectors.get_nearest_neighbors("c1w0", k=3)
print("neighbours", len(nn), all(isinstance(s, float) for s, w in nn))
vectors.save_model(out)
back = fasttext.load_model(out)
print("reloaded", (back.get_word_vector("c1w0") == vectors.get_word_vector("c1w0")).all())
'''
FASTTEXT_WANT = ["predict __label__c1 __label__c2 2", "test 100 True True", "vector (10,)",
                 "labels ['__label__c0', '__label__c1', '__label__c2']", "neighbours 3 True",
                 "reloaded True"]


def run(script, args, tmp_path):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=PKG + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, str(path), *map(str, args)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode().splitlines()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    r = np.random.default_rng(7)
    d = tmp_path_factory.mktemp("scripts")
    lines = [" ".join(f"t{t}w{w}" for w in r.integers(0, 6, 8))
             for t in r.integers(8, size=800)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    (d / "questions.txt").write_text(": topics\nt0w0 t0w1 t1w0 t1w1\nt2w0 t2w1 t3w0 t3w1\n")
    ft = []
    for c in r.integers(3, size=700):
        ft.append(" ".join([f"__label__c{c}"] + [f"c{c}w{w}" for w in r.integers(0, 5, 4)] +
                           [f"s{w}" for w in r.integers(0, 3, 2)]))
    (d / "train.txt").write_text("\n".join(ft[:600]) + "\n")
    (d / "test.txt").write_text("\n".join(ft[600:]) + "\n")
    return d


@pytest.mark.parametrize("library", ["sgrad", "gensim"])
def test_a_gensim_users_script(corpus, tmp_path, library):
    script = GENSIM_SCRIPT
    if library == "sgrad":
        script = script.replace("from gensim.models import Word2Vec",
                                "from sgrad import Word2Vec")
        script = script.replace("from gensim.models.callbacks import CallbackAny2Vec",
                                "from sgrad.word2vec import CallbackAny2Vec")
        assert "gensim" not in script
    else:
        pytest.importorskip("gensim")
    got = run(script, [corpus / "corpus.txt", corpus / "questions.txt", tmp_path / "model"],
              tmp_path)
    assert got == GENSIM_WANT


@pytest.mark.parametrize("library", ["sgrad", "fasttext"])
def test_a_fasttext_users_script(corpus, tmp_path, library):
    script = FASTTEXT_SCRIPT
    if library == "sgrad":
        script = script.replace("import fasttext\n", "import sgrad.fasttext as fasttext\n")
    else:
        pytest.importorskip("fasttext")
    got = run(script, [corpus / "train.txt", corpus / "test.txt", tmp_path / "model.bin"],
              tmp_path)
    assert got == FASTTEXT_WANT
