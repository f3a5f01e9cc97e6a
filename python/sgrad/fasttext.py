"""fastText's supervised classifier from Python, named as the ``fasttext`` module's:
``sgrad.fasttext.train_supervised(input=...)``, ``load_model(path)``, and a model with
``predict``, ``test``, ``save_model``, ``get_labels``, ``get_words``.

How it works: nothing is trained or predicted in Python. train_supervised runs the
sgrad-fasttext PROGRAM (``sgrad-fasttext supervised``, tools/fasttext/README.md; found as
sgrad-w2v is: SGRAD_FASTTEXT, next to libsgrad.so or in ../bin of it, PATH) with the flags
of the same names, into a temporary directory that the model object owns. predict runs
``sgrad-fasttext predict-prob MODEL - k`` once per call, every text given one line of its
stdin (a list of texts is one program run, not one per text), and parses what it prints;
test runs ``sgrad-fasttext test MODEL FILE k``. So the results are those of the program:
probabilities as it prints them (6 significant digits), precision and recall as it
prints them (3 significant digits), and each text gets the end-of-line word </s> as a
line of a file does. get_labels / get_words read the model file's metadata
(sgrad.read_checkpoint_meta). A failing run raises RuntimeError with the program's
message (stderr).

Arguments sgrad-fasttext has no flag for: ws and t are unused by fastText's supervised
training too; lrUpdateRate is accepted and ignored (the learning rate falls linearly per
step). thread sets the threads of sgrad's kernels; the model does not depend on it."""
import os
import shutil
import tempfile

import numpy as np

from ._program import find_program, run_program
from .checkpoint import read_checkpoint_meta
from .errors import check_input_file

__all__ = ["train_supervised", "load_model", "FastText"]


def _find_program():
    return find_program("sgrad-fasttext", "SGRAD_FASTTEXT")


class FastText:
    """A trained sgrad-fasttext model: a copy of its model file in a temporary directory
    owned by this object (removed with it)."""

    def __init__(self, model_file, program=None, log=""):
        self._program = program or _find_program()
        self._dir = tempfile.TemporaryDirectory(prefix="sgrad-fasttext-")
        self.path = os.path.join(self._dir.name, "model.bin")
        shutil.copyfile(model_file, self.path)
        self._meta = read_checkpoint_meta(self.path)
        if self._meta.get("fasttext.kind") != "supervised":
            raise ValueError(f"{model_file}: not an sgrad-fasttext model (no fasttext.kind "
                             "in its metadata)")
        self.log = log

    def get_labels(self):
        """The labels, in the model's row order (most frequent first)."""
        return self._meta["fasttext.labels"].split("\n")

    def get_words(self):
        """The words (with </s>), in the model's row order (most frequent first)."""
        words = self._meta["fasttext.words"]
        return words.split("\n") if words else []

    def _k(self, k):
        return len(self.get_labels()) if k is None or k <= 0 else int(k)

    def predict(self, text, k=1, threshold=0.0):
        """The k most likely labels of a text (a str: one line, no newline) and their
        probabilities: (labels tuple, float64 array), fastText's order (most likely
        first); k <= 0: all labels; those below threshold left out. A list of texts gives
        (list of label tuples, list of arrays) from one program run. A text with no known
        word and no n-gram row gives ((), empty array)."""
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError("predict: texts must be str")
            if "\n" in t:
                raise ValueError("predict processes one line at a time (remove '\\n')")
        if not texts:
            return [], []
        stdin = ("\n".join(texts) + "\n").encode("utf-8", errors="surrogateescape")
        out, _ = run_program([self._program, "predict-prob", self.path, "-",
                              str(self._k(k))], stdin)
        lines = out.split("\n")[:-1]
        if len(lines) != len(texts):
            raise RuntimeError("predict: sgrad-fasttext answered %d lines for %d texts"
                               % (len(lines), len(texts)))
        labels, probs = [], []
        for line in lines:
            tok = line.split()
            pairs = [(tok[i], float(tok[i + 1])) for i in range(0, len(tok), 2)]
            pairs = [(lab, p) for lab, p in pairs if p >= threshold]
            labels.append(tuple(lab for lab, _ in pairs))
            probs.append(np.array([p for _, p in pairs], dtype=np.float64))
        return (labels[0], probs[0]) if single else (labels, probs)

    def test(self, path, k=1):
        """(N, P@k, R@k) over the labelled lines of the file at path, as
        ``sgrad-fasttext test`` prints them. FileNotFoundError for a missing file."""
        path = check_input_file(path, "test")
        out, _ = run_program([self._program, "test", self.path, os.fspath(path),
                              str(self._k(k))])
        fields = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
        kk = self._k(k)
        return int(fields["N"]), float(fields[f"P@{kk}"]), float(fields[f"R@{kk}"])

    def save_model(self, path):
        """Writes the model file to path, atomically (a temporary file beside path, then a
        rename): path holds the old file or the whole new one."""
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-",
                                   dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "wb") as f, open(self.path, "rb") as src:
                shutil.copyfileobj(src, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def load_model(path):
    """A model saved by save_model or written by ``sgrad-fasttext supervised`` (copied, so
    later changes to path do not affect it). sgrad.FormatError for a damaged file,
    ValueError for a checkpoint that is not an sgrad-fasttext model."""
    return FastText(os.fspath(path))


def train_supervised(input, lr=0.1, dim=100, ws=5, epoch=5, minCount=1, minCountLabel=0,
                     minn=0, maxn=0, neg=5, wordNgrams=1, loss="softmax", bucket=2000000,
                     thread=None, lrUpdateRate=100, t=1e-4, label="__label__", verbose=2,
                     seed=0, batch=1, program=None):
    """Trains with ``sgrad-fasttext supervised`` (see the module's text for what runs and
    which arguments have no effect); thread None: all CPUs but one, as fastText's module.
    batch: examples per sgrad step (sgrad-fasttext's -batch; 1 is fastText's per-example
    SGD). The program's stderr (its progress at verbose 2) is kept in ``model.log``."""
    del ws, lrUpdateRate, t  # no flag: see the module's text
    input = check_input_file(input, "train_supervised: input")
    prog = program or _find_program()
    if thread is None:
        thread = max(1, (os.cpu_count() or 2) - 1)
    with tempfile.TemporaryDirectory(prefix="sgrad-fasttext-train-") as tmp:
        cmd = [prog, "supervised", "-input", os.fspath(input), "-output",
               os.path.join(tmp, "model"), "-lr", repr(float(lr)), "-dim", str(dim),
               "-epoch", str(epoch), "-minCount", str(minCount), "-minCountLabel",
               str(minCountLabel), "-minn", str(minn), "-maxn", str(maxn), "-neg", str(neg),
               "-wordNgrams", str(wordNgrams), "-loss", str(loss), "-bucket", str(bucket),
               "-thread", str(thread), "-label", str(label), "-verbose", str(verbose),
               "-seed", str(seed), "-batch", str(batch)]
        _, log = run_program(cmd)
        model = FastText(os.path.join(tmp, "model.bin"), prog, log)
    model.command = cmd
    return model
