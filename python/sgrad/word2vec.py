"""Word2Vec named as gensim's, trained by the sgrad-w2v PROGRAM.

``sgrad.Word2Vec(corpus_file=...)`` does not train in Python: it runs the sgrad-w2v
program (SGRAD_W2V, else next to the loaded libsgrad.so or in ../bin of its directory,
else on PATH) with the word2vec.c flags equivalent to gensim's arguments, has it write
the binary format to a temporary file, and reads that back with sg_wordvec_read. So the
vectors are bitwise those of an sgrad-w2v run with the same flags (and, deterministic
by default, the same for any number of workers).

gensim argument -> sgrad-w2v flag: vector_size -size, window -window, negative -negative,
sample -sample, min_count -min-count, epochs -iter, sg (1 skip-gram, 0 CBOW) -cbow (0, 1),
workers -threads, seed -seed, alpha -alpha (None: the program's default, 0.025 for
skip-gram and 0.05 for CBOW as word2vec.c; gensim uses 0.025 for both), hogwild -hogwild.
The program's progress log (-log, JSON lines) becomes ``model.training_log``.
"""
import json
import ctypes
import os
import tempfile
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._args import F32, c_string as _c_string
from .context import Context, default_context
from .errors import _raise, check_input_file
from .tensor import Tensor
from ._lib import lib
from ._program import find_program, run_program

_Path = Union[str, bytes, "os.PathLike"]


def _find_program() -> str:
    return find_program("sgrad-w2v", "SGRAD_W2V")


class KeyedVectors:
    """Words and their vectors, as gensim's KeyedVectors: ``index_to_key``,
    ``key_to_index``, ``vectors`` ((V, D) float32), ``kv[word]``, ``word in kv``,
    ``similarity``, ``most_similar``, ``save_word2vec_format``. Plain numpy: no Tensor,
    no Context; ``KeyedVectors(words, vectors)`` takes the words in row order and a
    (len(words), D) array."""

    def __init__(self, words: Iterable[str], vectors: np.ndarray):
        self.index_to_key = list(words)
        self.key_to_index = {w: i for i, w in enumerate(self.index_to_key)}
        self.vectors = vectors
        self.vector_size = vectors.shape[1]

    @classmethod
    def load_word2vec_format(cls, path: _Path, binary: Optional[bool] = None,
                             ctx: Optional[Context] = None) -> "KeyedVectors":
        """Reads a file in word2vec's text or binary format (``binary`` None: detected from
        the file) into a new KeyedVectors with float32 vectors, as gensim's
        (sg_wordvec_read). FileNotFoundError for a missing file, sgrad.FormatError (a
        ValueError) for a damaged or foreign one. ``ctx``: where errors are recorded
        (default: ``default_context()``)."""
        path = check_input_file(path, "load_word2vec_format")
        ctx = ctx or default_context()
        wv = lib.sg_wordvec_read(ctx._handle(),
                                 _c_string(os.fsencode(path), "load_word2vec_format"),
                                 -1 if binary is None else int(bool(binary)))
        if not wv:
            _raise(ctx._ptr, "load_word2vec_format")
        try:
            n = lib.sg_wordvec_count(wv)
            words = [lib.sg_wordvec_word(wv, i).decode("utf-8", "surrogateescape")
                     for i in range(n)]
            t = Tensor(ctx, lib.sg_wordvec_vectors(wv), True, owner=wv)
            vectors = t._copy_out(t._ptr)
        finally:
            lib.sg_wordvec_free(wv)
        return cls(words, vectors)

    def __len__(self) -> int:
        return len(self.index_to_key)

    def __contains__(self, word: str) -> bool:
        return word in self.key_to_index

    def __getitem__(self, word: str) -> np.ndarray:
        return self.vectors[self.key_to_index[word]]

    def _unit(self) -> np.ndarray:
        norms = np.linalg.norm(self.vectors, axis=1, keepdims=True)
        return self.vectors / np.where(norms > 0, norms, 1)

    def similarity(self, w1: str, w2: str) -> float:
        """The cosine similarity of two words' vectors, a float in [-1, 1] (computed in
        float64), as gensim's; KeyError for a word not in the vocabulary."""
        a, b = self[w1].astype(np.float64), self[w2].astype(np.float64)
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    def most_similar(self, positive: Union[str, Sequence[str]] = (),
                     negative: Union[str, Sequence[str]] = (),
                     topn: int = 10) -> List[Tuple[str, float]]:
        """The ``topn`` words nearest by cosine to the mean of the positive words' unit
        vectors minus the negative ones' (gensim's rule), the query words left out, as a
        list of (word, cosine similarity) pairs, most similar first (ties in vocabulary
        order). A single word may be given as a str. KeyError for a word not in the
        vocabulary."""
        if isinstance(positive, str):
            positive = [positive]
        if isinstance(negative, str):
            negative = [negative]
        unit = self._unit()
        q = np.zeros(self.vector_size)
        for w in positive:
            q += unit[self.key_to_index[w]]
        for w in negative:
            q -= unit[self.key_to_index[w]]
        q /= max(len(positive) + len(negative), 1)
        q /= np.linalg.norm(q) or 1
        sims = unit @ q
        skip = {self.key_to_index[w] for w in list(positive) + list(negative)}
        order = [i for i in np.argsort(-sims, kind="stable") if i not in skip][:topn]
        return [(self.index_to_key[i], float(sims[i])) for i in order]

    def save_word2vec_format(self, path: _Path, binary: bool = False,
                             ctx: Optional[Context] = None) -> None:
        """Writes the words and vectors (as float32) to ``path`` in word2vec's text format,
        or its binary format with ``binary=True``, atomically: path keeps its old content on
        any error (sg_wordvec_write). InputOutputError (a RuntimeError) when the file cannot
        be written, ValueError for a NUL character in the path or a word. ``ctx``: where
        errors are recorded (default: ``default_context()``)."""
        ctx = ctx or default_context()
        words = (ctypes.c_char_p * max(len(self), 1))(
            *[_c_string(w.encode("utf-8", "surrogateescape"), "save_word2vec_format: word")
              for w in self.index_to_key])
        path = _c_string(os.fsencode(path), "save_word2vec_format")
        vec = np.ascontiguousarray(self.vectors, dtype=np.float32)
        shape = (ctypes.c_int64 * 2)(*vec.shape)
        t = lib.sg_tensor_wrap(ctx._handle(), F32, 2, shape, vec.ctypes.data)
        if not t:
            _raise(ctx._ptr, "save_word2vec_format")
        try:
            rc = lib.sg_wordvec_write(path, t, words, int(bool(binary)))
            if rc:
                _raise(ctx._ptr, "save_word2vec_format", rc)
        finally:
            lib.sg_tensor_free(t)


class Word2Vec:
    """Trains word vectors by running the sgrad-w2v program (see the module's text);
    ``.wv`` holds the result, ``.command`` the command line it ran, ``.training_log`` the
    progress records of its -log file (dicts with epoch, words, total_words, progress,
    steps, lr, loss, words_per_sec_thread, elapsed_s; README "Training log"), which
    ``sgrad.plot_training`` draws. ``program``: the sgrad-w2v to run (default: found as the
    module's text says). FileNotFoundError for a missing corpus_file or program,
    RuntimeError carrying the program's stderr when it fails."""

    def __init__(self, corpus_file: _Path, vector_size: int = 100, window: int = 5,
                 negative: int = 5, sample: float = 1e-3, min_count: int = 5, epochs: int = 5,
                 sg: int = 1, workers: int = 1, seed: int = 1, alpha: Optional[float] = None,
                 hogwild: bool = False, program: Optional[str] = None):
        corpus_file = check_input_file(corpus_file, "Word2Vec: corpus_file")
        prog = program or _find_program()
        with tempfile.TemporaryDirectory(prefix="sgrad-w2v-") as tmp:
            out, log = os.path.join(tmp, "vectors.bin"), os.path.join(tmp, "log.jsonl")
            cmd = [prog, "-train", os.fspath(corpus_file), "-output", out, "-log", log,
                   "-binary", "1",
                   "-size", str(vector_size), "-window", str(window), "-negative",
                   str(negative), "-sample", repr(float(sample)), "-min-count", str(min_count),
                   "-iter", str(epochs), "-cbow", "0" if sg else "1", "-threads",
                   str(workers), "-seed", str(seed), "-hogwild", "1" if hogwild else "0"]
            if alpha is not None:
                cmd += ["-alpha", repr(float(alpha))]
            self.command = cmd
            _, self.log = run_program(cmd)
            self.wv = KeyedVectors.load_word2vec_format(out, binary=True)
            with open(log, encoding="utf-8") as f:
                self.training_log = [json.loads(line) for line in f if line.strip()]
