"""Word2Vec and KeyedVectors named as gensim's, trained in-process by libsgrad_models.

``sgrad.Word2Vec(sentences=..., ...)`` or ``Word2Vec(corpus_file=..., ...)`` takes gensim's
arguments and defaults and trains through libsgrad_models (include/sgrad_models.h) in this
process: ctypes releases the GIL for the whole C call, and the library's event callback
(which takes the GIL back) drives ``callbacks``, the loss, ``training_log`` and Ctrl-C.
Sentences (any restartable iterable of lists of str) become chunks of token ids handed to
C (sg_w2v_train_tokens); a corpus_file is read by C (sg_w2v_train_file). With the same
options a corpus_file gives vectors bitwise those of ``sgrad-w2v -train FILE`` with the
equivalent flags, and sentences holding the file's lines give the same vectors as the
file (the library hands ids in as it reads the file).

gensim argument -> sgrad-w2v flag: vector_size -size, window -window, negative -negative,
hs -hs, sample -sample, min_count -min-count, epochs -iter, sg (1 skip-gram, 0 CBOW)
-cbow (0, 1), workers -threads, seed -seed, alpha -alpha (gensim's 0.025 for both
architectures; word2vec.c's CBOW default 0.05 is not used). The model does not depend on
``workers`` (deterministic mode, hogwild off).

Continued training is gensim's: ``train`` called again on a trained model, or on
``Word2Vec.load``'s, trains the vectors on (sg_w2v_train_* on a model holding tables): the
vocabulary stays (words outside it are skipped), the learning rate falls again from alpha
over the call's epochs, and the random stream goes on from where the last call left it.
The model file records that stream, so save, load and train gives bitwise the vectors of
training on in the process.

Where sgrad differs from gensim (each an error, never a silent difference): the learning
rate falls as word2vec.c's, linearly by words from alpha to alpha * 1e-4 over a training
call, so only gensim's default ``min_alpha`` (and ``end_alpha``) is accepted;
``max_vocab_size``, ``max_final_vocab``, ``trim_rule``, ``ns_exponent`` other than 0.75,
``cbow_mean=0``, ``null_word``, ``sorted_vocab=0``, ``shrink_windows=False``, ``hashfxn``,
``batch_words``, ``word_count`` of train and ``build_vocab(update=True)`` (a model's
vocabulary is fixed once built) raise NotImplementedError naming the argument. ``save``
writes sgrad's model file (safetensors: tables, vocabulary with counts, options, the
random stream), not a pickle; ``Word2Vec.load`` reads it (or a training checkpoint of
sgrad-w2v).
"""
import ctypes
import itertools
import os
import tempfile
import types
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._args import F32, c_string as _c_string
from .context import Context, default_context
from .errors import _raise, check_input_file
from .tensor import Tensor
from ._lib import lib
from . import _models as M

_Path = Union[str, bytes, "os.PathLike"]
_Key = Union[str, np.ndarray]

__all__ = ["Word2Vec", "KeyedVectors", "CallbackAny2Vec"]


class CallbackAny2Vec:
    """gensim's callback base class: subclass it and override any of on_train_begin,
    on_epoch_begin, on_epoch_end, on_train_end (each takes the model), then pass instances
    as ``Word2Vec(callbacks=[...])`` or ``train(callbacks=[...])``. on_batch_begin /
    on_batch_end are not called (the C trainer's steps are not gensim's batches)."""

    def on_train_begin(self, model: Any) -> None:
        """Called once before training."""

    def on_epoch_begin(self, model: Any) -> None:
        """Called before each epoch."""

    def on_epoch_end(self, model: Any) -> None:
        """Called after each epoch."""

    def on_train_end(self, model: Any) -> None:
        """Called once after training."""

    def on_batch_begin(self, model: Any) -> None:
        """Never called by sgrad (there for gensim subclasses)."""

    def on_batch_end(self, model: Any) -> None:
        """Never called by sgrad (there for gensim subclasses)."""


def _enc(word: str) -> bytes:
    return word.encode("utf-8", "surrogateescape")


def _dec(word: bytes) -> str:
    return word.decode("utf-8", "surrogateescape")


_PACK_TOKENS = 1 << 16  # tokens a chunk handed to C: the most of a corpus Python holds at once


def _i64p(a: np.ndarray) -> Any:
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


def _packed_chunks(corpus: Iterable[List[str]], what: str) -> Iterator[Tuple[bytes, np.ndarray]]:
    """corpus (lists of str) in chunks of whole sentences packed for C (sg_vocab_add_packed):
    the tokens NUL-terminated in one buffer, and each sentence's token count. TypeError
    for a sentence given as a str, ValueError for a word holding a NUL."""
    chunk: List[List[str]] = []
    tokens = 0
    for sentence in corpus:
        if isinstance(sentence, str):
            raise TypeError(f"{what}: a sentence must be a list of str, not a str")
        chunk.append(sentence)
        tokens += len(sentence)
        if tokens >= _PACK_TOKENS:
            yield _pack(chunk, what)
            chunk, tokens = [], 0
    if chunk:
        yield _pack(chunk, what)


def _pack(chunk: List[List[str]], what: str) -> Tuple[bytes, np.ndarray]:
    lens = np.fromiter(map(len, chunk), np.int64, len(chunk))
    words = list(itertools.chain.from_iterable(chunk))
    text = "\0".join(words)
    if text.count("\0") != max(len(words) - 1, 0):
        bad = next(w for w in words if "\0" in w)
        raise ValueError(f"{what}: the word {bad!r} holds a NUL character")
    return (_enc(text) + b"\0") if words else b"", lens


def _table_copy(t: int) -> np.ndarray:
    """A numpy copy of a borrowed 2-D float32 sg_tensor."""
    shape = lib.sg_tensor_shape(t)
    rows, cols = shape[0], shape[1]
    if rows * cols == 0:
        return np.zeros((rows, cols), np.float32)
    buf = (ctypes.c_float * (rows * cols)).from_address(lib.sg_tensor_data(t))
    return np.frombuffer(buf, np.float32).reshape(rows, cols).copy()


class _Handle:
    """Owns an sg_w2v handle (freed with this object)."""

    def __init__(self, ptr: int):
        self.ptr = ptr
        self._free = M.models().sg_w2v_free

    def __del__(self) -> None:
        if self.ptr:
            self._free(self.ptr)
            self.ptr = None


class KeyedVectors:
    """Words and their vectors, as gensim's KeyedVectors: ``index_to_key``,
    ``key_to_index``, ``vectors`` ((V, D) float32), ``kv[word]``, ``word in kv``,
    ``get_vector``, ``similarity``, ``most_similar``, ``similar_by_vector``,
    ``doesnt_match``, ``evaluate_word_analogies``, ``save_word2vec_format`` /
    ``load_word2vec_format``. ``KeyedVectors(words, vectors)`` takes the words in row order
    and a (len(words), D) array. The queries other than evaluate_word_analogies are numpy
    over ``vectors`` (gensim's rules); the analogy benchmark runs in libsgrad_models."""

    def __init__(self, words: Iterable[str], vectors: np.ndarray):
        self.index_to_key = list(words)
        self.key_to_index = {w: i for i, w in enumerate(self.index_to_key)}
        self.vectors = vectors
        self.vector_size = vectors.shape[1]
        self._handle: Optional[_Handle] = None  # the C model these vectors came from

    @classmethod
    def load_word2vec_format(cls, fname: _Path, binary: Optional[bool] = None,
                             ctx: Optional[Context] = None) -> "KeyedVectors":
        """Reads a file in word2vec's text or binary format (``binary`` None: detected from
        the file) into a new KeyedVectors with float32 vectors, as gensim's
        (sg_wordvec_read). FileNotFoundError for a missing file, sgrad.FormatError (a
        ValueError) for a damaged or foreign one. ``ctx``: where errors are recorded
        (default: ``default_context()``)."""
        path = check_input_file(fname, "load_word2vec_format")
        ctx = ctx or default_context()
        wv = lib.sg_wordvec_read(ctx._handle(),
                                 _c_string(os.fsencode(path), "load_word2vec_format"),
                                 -1 if binary is None else int(bool(binary)))
        if not wv:
            _raise(ctx._ptr, "load_word2vec_format")
        try:
            n = lib.sg_wordvec_count(wv)
            words = [_dec(lib.sg_wordvec_word(wv, i)) for i in range(n)]
            t = Tensor(ctx, lib.sg_wordvec_vectors(wv), True, owner=wv)
            vectors = t._copy_out(t._ptr)
        finally:
            lib.sg_wordvec_free(wv)
        return cls(words, vectors)

    def __len__(self) -> int:
        return len(self.index_to_key)

    def __contains__(self, key: str) -> bool:
        return key in self.key_to_index

    def __getitem__(self, key: str) -> np.ndarray:
        return self.get_vector(key)

    def get_index(self, key: str) -> int:
        """The row of key; KeyError naming it when it is not in the vocabulary."""
        try:
            return self.key_to_index[key]
        except KeyError:
            raise KeyError(f"Key '{key}' not present") from None

    def get_vector(self, key: str, norm: bool = False) -> np.ndarray:
        """key's vector (a view of ``vectors``), or its unit vector with ``norm=True``;
        KeyError for a key not in the vocabulary."""
        v = self.vectors[self.get_index(key)]
        if norm:
            n = np.linalg.norm(v)
            return v / n if n > 0 else v
        return v

    def _unit(self) -> np.ndarray:
        norms = np.linalg.norm(self.vectors, axis=1, keepdims=True)
        return self.vectors / np.where(norms > 0, norms, 1)

    def similarity(self, w1: str, w2: str) -> float:
        """The cosine similarity of two words' vectors, a float in [-1, 1] (computed in
        float64), as gensim's; KeyError for a word not in the vocabulary."""
        a, b = self[w1].astype(np.float64), self[w2].astype(np.float64)
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    def _mean(self, keys: Sequence[_Key], weights: Sequence[float]) -> np.ndarray:
        q = np.zeros(self.vector_size)
        total = 0.0
        for key, w in zip(keys, weights):
            if isinstance(key, np.ndarray):
                if key.shape != (self.vector_size,):
                    raise ValueError(f"most_similar: a vector of shape {key.shape}, not "
                                     f"({self.vector_size},)")
                q += w * key  # a vector given as is (gensim's get_mean_vector)
            else:
                q += w * self.get_vector(key, norm=True)
            total += abs(w)
        if total == 0:
            raise ValueError("cannot compute similarity with no input")
        q /= total
        return q / (np.linalg.norm(q) or 1)

    def _top(self, q: np.ndarray, skip: set, topn: Optional[int],
             restrict_vocab: Optional[int]) -> Any:
        unit = self._unit()
        if restrict_vocab is not None:
            unit = unit[:restrict_vocab]
        sims = unit @ q
        if topn is None:
            return sims
        order = [i for i in np.argsort(-sims, kind="stable") if i not in skip][:topn]
        return [(self.index_to_key[i], float(sims[i])) for i in order]

    def most_similar(self, positive: Union[_Key, Sequence[_Key], None] = None,
                     negative: Union[_Key, Sequence[_Key], None] = None,
                     topn: Optional[int] = 10,
                     restrict_vocab: Optional[int] = None) -> Any:
        """The ``topn`` words nearest by cosine to the mean of the positive keys' unit
        vectors (a key is a word, or a vector used as given) minus the negative ones'
        (gensim's rule), the query words left out, as (word, cosine similarity) pairs, most
        similar first (ties in vocabulary order); only the first ``restrict_vocab`` rows
        are searched. ``topn=None``: the similarities of all rows (an array). A single
        word may be given as a str. KeyError for a word not in the vocabulary, ValueError
        for no query at all."""
        def as_list(x: Any) -> List[_Key]:
            if x is None:
                return []
            if isinstance(x, (str, np.ndarray)):
                return [x]
            return list(x)
        pos, neg = as_list(positive), as_list(negative)
        q = self._mean(pos + neg, [1.0] * len(pos) + [-1.0] * len(neg))
        skip = {self.get_index(k) for k in pos + neg if isinstance(k, str)}
        return self._top(q, skip, topn, restrict_vocab)

    def similar_by_vector(self, vector: np.ndarray, topn: Optional[int] = 10,
                          restrict_vocab: Optional[int] = None) -> Any:
        """most_similar of one vector (nothing left out), as gensim's."""
        return self.most_similar(positive=[np.asarray(vector)], topn=topn,
                                 restrict_vocab=restrict_vocab)

    def similar_by_word(self, word: str, topn: Optional[int] = 10,
                        restrict_vocab: Optional[int] = None) -> Any:
        """most_similar of one word (the word left out), as gensim's."""
        return self.most_similar(positive=[word], topn=topn, restrict_vocab=restrict_vocab)

    def doesnt_match(self, words: Sequence[str]) -> str:
        """The word furthest (by cosine) from the mean of the words' unit vectors, words
        not in the vocabulary ignored (gensim's rule); ValueError when none is known."""
        used = [w for w in words if w in self]
        if not used:
            raise ValueError("cannot select a word from an empty list")
        vecs = np.vstack([self.get_vector(w, norm=True) for w in used]).astype(np.float64)
        mean = vecs.mean(axis=0)
        mean /= np.linalg.norm(mean) or 1
        return sorted(zip(vecs @ mean, used))[0][1]

    def _c_model(self) -> _Handle:
        if self._handle is None:
            with tempfile.TemporaryDirectory(prefix="sgrad-kv-") as tmp:
                path = os.path.join(tmp, "vectors.bin")
                self.save_word2vec_format(path, binary=True)
                err = M.ModelError()
                ptr = M.models().sg_w2v_load_vectors(os.fsencode(path), 1, ctypes.byref(err))
                if not ptr:
                    M.raise_error(err, "evaluate_word_analogies")
                self._handle = _Handle(ptr)
        return self._handle

    def evaluate_word_analogies(self, analogies: _Path, restrict_vocab: int = 300000,
                                case_insensitive: bool = True,
                                dummy4unknown: bool = False) -> Tuple[float, List[Dict[str, Any]]]:
        """word2vec's analogy benchmark (a questions-words file) over the
        ``restrict_vocab`` most frequent words, ASCII case folded, run in libsgrad_models
        (sg_w2v_evaluate): (score, sections) as gensim returns them, score the fraction of
        the covered questions answered right. Each section is a dict with "section" (its
        name; the last is "Total accuracy"), and, where gensim lists the questions,
        "correct" and "incorrect" as COUNTS (the C API counts; it does not list), plus
        "total" (questions in the section, covered or not). NotImplementedError for
        case_insensitive=False or dummy4unknown=True; FileNotFoundError for a missing
        file."""
        if not case_insensitive:
            raise NotImplementedError("evaluate_word_analogies: case_insensitive=False "
                                      "(libsgrad_models folds ASCII case)")
        if dummy4unknown:
            raise NotImplementedError("evaluate_word_analogies: dummy4unknown=True")
        path = check_input_file(analogies, "evaluate_word_analogies")
        h = self._c_model()
        ev, err = M.W2VEval(), M.ModelError()
        mm = M.models()
        if mm.sg_w2v_evaluate(h.ptr, os.fsencode(path), int(restrict_vocab), ctypes.byref(ev),
                              ctypes.byref(err)):
            M.raise_error(err, "evaluate_word_analogies", path)
        try:
            sections = []
            for i in range(ev.n_sections):
                s = ev.sections[i]
                sections.append({"section": _dec(s.name), "correct": int(s.correct),
                                 "incorrect": int(s.covered - s.correct), "total": int(s.total)})
            sections.append({"section": "Total accuracy", "correct": int(ev.correct),
                             "incorrect": int(ev.covered - ev.correct),
                             "total": int(ev.questions)})
            score = ev.correct / ev.covered if ev.covered else 0.0
        finally:
            mm.sg_w2v_eval_free(ctypes.byref(ev))
        return float(score), sections

    def save_word2vec_format(self, fname: _Path, binary: bool = False,
                             ctx: Optional[Context] = None) -> None:
        """Writes the words and vectors (as float32) to ``fname`` in word2vec's text
        format, or its binary format with ``binary=True``, atomically: the file keeps its
        old content on any error (sg_wordvec_write). InputOutputError (a RuntimeError) when
        the file cannot be written, ValueError for a NUL character in the path or a word.
        ``ctx``: where errors are recorded (default: ``default_context()``)."""
        ctx = ctx or default_context()
        words = (ctypes.c_char_p * max(len(self), 1))(
            *[_c_string(_enc(w), "save_word2vec_format: word") for w in self.index_to_key])
        path = _c_string(os.fsencode(fname), "save_word2vec_format")
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


_NOT_YET = {  # gensim argument: its default, the only value honoured
    "max_vocab_size": None, "min_alpha": 0.0001, "ns_exponent": 0.75, "cbow_mean": 1,
    "null_word": 0, "trim_rule": None, "sorted_vocab": 1, "batch_words": 10000,
    "max_final_vocab": None, "shrink_windows": True, "hashfxn": hash}


def _check_restartable(corpus: Any, what: str) -> None:
    if isinstance(corpus, types.GeneratorType):
        raise TypeError(f"You can't pass a generator as the {what} argument. Try a sequence.")
    if isinstance(corpus, (str, bytes)):
        raise TypeError(f"{what}: a str is not a corpus; pass an iterable of lists of str "
                        "(or corpus_file= for a file)")
    try:
        iter(corpus)
    except TypeError:
        raise TypeError(f"{what}: {type(corpus).__name__} is not iterable") from None


class Word2Vec:
    """gensim's Word2Vec, trained in-process by libsgrad_models (see the module's text for
    what differs). Given ``sentences`` (a restartable iterable of lists of str; a one-shot
    generator is refused) or ``corpus_file`` (a path), it builds the vocabulary and trains
    at once; given neither, call ``build_vocab`` and ``train``. ``.wv`` holds the words and
    vectors; ``.training_log`` progress records (dicts with epoch, words, total_words,
    progress, steps, lr, loss, words_per_sec_thread, elapsed_s: those of sgrad-w2v -log),
    which ``sgrad.plot_training`` draws. ``callbacks``: objects with any of gensim's
    on_train_begin / on_epoch_begin / on_epoch_end / on_train_end(model), called from the
    training call (``get_latest_training_loss()`` is up to date there, but ``model.wv`` holds
the vectors from before the call: libsgrad_models hands the tables out only when the
training call returns; before training they are zeros, not gensim's random start). Ctrl-C during training
    stops it at the next step: KeyboardInterrupt is raised and the model keeps the vectors
    of its last step. ValueError naming the argument for a bad value (before anything is
    read), FileNotFoundError for a missing corpus_file, NotImplementedError for a gensim
    argument sgrad does not honour."""

    def __init__(self, sentences: Optional[Iterable[List[str]]] = None,
                 corpus_file: Optional[_Path] = None, vector_size: int = 100,
                 alpha: float = 0.025, window: int = 5, min_count: int = 5,
                 max_vocab_size: Optional[int] = None, sample: float = 1e-3, seed: int = 1,
                 workers: int = 3, min_alpha: float = 0.0001, sg: int = 0, hs: int = 0,
                 negative: int = 5, ns_exponent: float = 0.75, cbow_mean: int = 1,
                 hashfxn: Any = hash, epochs: int = 5, null_word: int = 0,
                 trim_rule: Any = None, sorted_vocab: int = 1, batch_words: int = 10000,
                 compute_loss: bool = False, callbacks: Sequence[Any] = (),
                 comment: Optional[str] = None, max_final_vocab: Optional[int] = None,
                 shrink_windows: bool = True):
        given = dict(max_vocab_size=max_vocab_size, min_alpha=min_alpha,
                     ns_exponent=ns_exponent, cbow_mean=cbow_mean, null_word=null_word,
                     trim_rule=trim_rule, sorted_vocab=sorted_vocab, batch_words=batch_words,
                     max_final_vocab=max_final_vocab, shrink_windows=shrink_windows,
                     hashfxn=hashfxn)
        for name, value in given.items():
            if value is not _NOT_YET[name] and value != _NOT_YET[name]:
                raise NotImplementedError(
                    f"Word2Vec: {name}={value!r} is not supported by sgrad (only gensim's "
                    f"default {_NOT_YET[name]!r}); see sgrad.word2vec's text")
        checks = [("vector_size", 1 <= vector_size <= 4096, "in [1, 4096]"),
                  ("window", 1 <= window <= 100, "in [1, 100]"),
                  ("negative", 0 <= negative <= 100, "in [0, 100]"),
                  ("hs", hs in (0, 1), "0 or 1"), ("sg", sg in (0, 1), "0 or 1"),
                  ("min_count", min_count >= 1, ">= 1"),
                  ("sample", 0 <= sample <= 1, "in [0, 1]"),
                  ("alpha", 0 < alpha <= 10, "in (0, 10]"),
                  ("epochs", 1 <= epochs <= 100000, "in [1, 100000]"),
                  ("workers", 1 <= workers <= 1024, "in [1, 1024]"),
                  ("seed", 0 <= seed < 2 ** 63, "in [0, 2**63)")]
        for name, ok, want in checks:
            if not ok:
                raise ValueError(f"Word2Vec: {name} must be {want}, not {locals()[name]!r}")
        if negative == 0 and hs == 0:
            raise ValueError("Word2Vec: negative=0 and hs=0 leave nothing to train (set "
                             "negative > 0 or hs=1)")
        if sentences is not None and corpus_file is not None:
            raise ValueError("Word2Vec: give sentences or corpus_file, not both")
        self.vector_size, self.alpha, self.window, self.min_count = vector_size, alpha, window, min_count
        self.sample, self.seed, self.workers, self.min_alpha = sample, seed, workers, min_alpha
        self.sg, self.hs, self.negative, self.epochs = sg, hs, negative, epochs
        self.ns_exponent, self.cbow_mean = ns_exponent, cbow_mean
        self.compute_loss, self.callbacks, self.comment = compute_loss, tuple(callbacks), comment
        self.corpus_count = 0
        self.corpus_total_words = 0
        self.training_log: List[Dict[str, Any]] = []
        self.running_training_loss = 0.0
        self._handle: Optional[_Handle] = None
        self._trained = False
        self._index: Dict[str, int] = {}
        self.wv = KeyedVectors([], np.zeros((0, vector_size), np.float32))
        if sentences is not None or corpus_file is not None:
            self.build_vocab(corpus_iterable=sentences, corpus_file=corpus_file)
            self.train(corpus_iterable=sentences, corpus_file=corpus_file,
                       total_examples=self.corpus_count, total_words=self.corpus_total_words,
                       epochs=self.epochs, callbacks=self.callbacks)

    # ------------------------------------------------------------ vocabulary
    def _opts(self) -> M.W2VOpts:
        o = M.models().sg_w2v_opts_default()
        o.size, o.window, o.negative, o.hs = self.vector_size, self.window, self.negative, self.hs
        o.iter, o.threads, o.cbow, o.hogwild = self.epochs, self.workers, 1 - self.sg, 0
        o.min_count, o.sample, o.alpha, o.seed = self.min_count, float(self.sample), float(self.alpha), self.seed
        o.verbose = 0
        o.on_event = self._event_callback()
        return o

    def _event_callback(self) -> Any:
        if getattr(self, "_event_fn", None) is None:
            self._event_fn = M.EVENT_FN(self._on_event)  # kept alive as long as the model
        return self._event_fn

    def build_vocab(self, corpus_iterable: Optional[Iterable[List[str]]] = None,
                    corpus_file: Optional[_Path] = None, update: bool = False,
                    progress_per: int = 10000, keep_raw_vocab: bool = False,
                    trim_rule: Any = None) -> None:
        """Counts the words of corpus_iterable (a restartable iterable of lists of str) or
        of corpus_file, keeps those seen min_count times or more, most frequent first (ties
        in byte order), and sets up the tables (seeded as sgrad-w2v does).
        ``corpus_count`` is then the number of sentences, ``corpus_total_words`` the
        tokens counted. NotImplementedError for update=True or a trim_rule;
        FileNotFoundError for a missing corpus_file."""
        if update:
            raise NotImplementedError("build_vocab: update=True (libsgrad_models keeps a "
                                      "model's vocabulary fixed once built; train() on new "
                                      "sentences trains on, skipping words outside it)")
        if trim_rule is not None:
            raise NotImplementedError("build_vocab: trim_rule")
        if (corpus_iterable is None) == (corpus_file is None):
            raise ValueError("build_vocab: give exactly one of corpus_iterable or corpus_file")
        mm = M.models()
        err = M.ModelError()
        path = None
        if corpus_file is not None:
            path = check_input_file(corpus_file, "build_vocab: corpus_file")
        else:
            _check_restartable(corpus_iterable, "corpus_iterable")
        ptr = mm.sg_w2v_new(ctypes.byref(self._opts()), ctypes.byref(err))
        if not ptr:
            M.raise_error(err, "Word2Vec")
        handle = _Handle(ptr)
        if path is not None:
            if mm.sg_w2v_build_vocab(ptr, os.fsencode(path), None, ctypes.byref(err)):
                M.raise_error(err, "build_vocab", path)
        else:
            given = mm.sg_vocab_new()
            if not given:
                raise MemoryError("build_vocab: out of memory")
            try:
                self._count(mm, given, corpus_iterable)
                if mm.sg_w2v_build_vocab(ptr, None, given, ctypes.byref(err)):
                    M.raise_error(err, "build_vocab")
            finally:
                mm.sg_vocab_free(given)
        v = mm.sg_w2v_vocab(ptr)
        self.corpus_count = int(mm.sg_vocab_lines(v))
        self.corpus_total_words = int(mm.sg_vocab_tokens(v))
        self._handle, self._trained = handle, False
        self._source = ("file", path) if path is not None else ("iterable", None)
        self._refresh_wv()

    @staticmethod
    def _count(mm: Any, given: int, corpus: Iterable[List[str]]) -> None:
        err = M.ModelError()
        for buf, lens in _packed_chunks(corpus, "build_vocab"):
            if mm.sg_vocab_add_packed(given, buf, len(buf), _i64p(lens), len(lens),
                                      ctypes.byref(err)):
                M.raise_error(err, "build_vocab")

    def _refresh_wv(self) -> None:
        mm = M.models()
        ptr = self._handle.ptr
        n = mm.sg_w2v_size(ptr)
        words = [_dec(mm.sg_w2v_word(ptr, i)) for i in range(n)]
        t = mm.sg_w2v_table(ptr, 0)
        vectors = _table_copy(t) if t else np.zeros((n, self.vector_size), np.float32)
        self.wv = KeyedVectors(words, vectors)
        self.wv._handle = self._handle
        self._index = self.wv.key_to_index

    # ------------------------------------------------------------ training
    def _on_event(self, ud: Any, ep: Any) -> int:
        e = ep.contents
        if self._pending is not None or self._guard.hit:
            return 1  # asked to stop: every event asks again until the run ends
        try:
            if e.kind == M.EVENT_STEP:
                self.running_training_loss += e.loss
                self._log(e, e.words, e.loss, e.examples, False)
            elif e.kind == M.EVENT_EPOCH:
                for cb in self._callbacks:
                    getattr(cb, "on_epoch_end", lambda m: None)(self)
                if e.epoch < e.epochs:
                    for cb in self._callbacks:
                        getattr(cb, "on_epoch_begin", lambda m: None)(self)
            elif e.kind == M.EVENT_END:
                self._log(e, e.words_done, 0.0, 0, True)
            ctypes.pythonapi.PyErr_CheckSignals()  # raises KeyboardInterrupt after Ctrl-C
            return 0
        except BaseException as exc:  # noqa: B902  (Ctrl-C too: stop, raise it after)
            if self._pending is None:
                self._pending = exc
            return 1

    def _log(self, e: Any, words: int, loss: float, n: int, force: bool) -> None:
        """Records as sgrad-w2v's -log writes them (tools/common/progress.c)."""
        s = self._logstate
        s["loss"] += loss
        s["n"] += n
        if not force and words < s["next"]:
            return
        dt = e.elapsed_s - s["time"]
        dw = 0 if s["words"] < 0 else words - s["words"]
        total = e.total_words
        self.training_log.append({
            "epoch": e.epoch, "words": words, "total_words": total,
            "progress": words / total if total > 0 else 1.0, "steps": e.steps, "lr": e.lr,
            "loss": s["loss"] / s["n"] if s["n"] > 0 else None,
            "words_per_sec_thread": dw / dt / max(e.threads, 1) if dt > 0 and dw > 0 else 0.0,
            "elapsed_s": e.elapsed_s})
        s.update(time=e.elapsed_s, words=words, next=words + max(total // 200, 1), loss=0.0, n=0)

    def _reader(self, corpus: Iterable[List[str]]) -> Any:
        """The token source of sg_w2v_train_tokens over corpus: each call looks up the next
        chunk of sentences in C (sg_w2v_lookup_packed) and hands out its ids."""
        mm, ptr = M.models(), self._handle.ptr
        state: Dict[str, Any] = {"chunks": None, "ids": np.empty(0, np.int32), "at": 0}
        err = M.ModelError()

        def refill() -> bool:
            if state["chunks"] is None:
                state["chunks"] = _packed_chunks(corpus, "train")
            nxt = next(state["chunks"], None)
            if nxt is None:
                return False
            buf, lens = nxt
            ids = np.empty(int(lens.sum()) + len(lens), np.int32)
            n = mm.sg_w2v_lookup_packed(ptr, buf, len(buf), _i64p(lens), len(lens),
                                        ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                        len(ids), ctypes.byref(err))
            if n < 0:
                M.raise_error(err, "train")
            state["ids"], state["at"] = ids[:n], 0
            return True

        def read(ud: Any, out: Any, cap: int) -> int:
            try:
                while state["at"] == len(state["ids"]):
                    if not refill():
                        state["chunks"] = None  # the next call starts the next epoch
                        return 0
                ids, at = state["ids"], state["at"]
                n = min(cap, len(ids) - at)
                ctypes.memmove(out, ids.ctypes.data + 4 * at, 4 * n)
                state["at"] = at + n
                return n
            except BaseException as exc:  # noqa: B902
                if self._pending is None:
                    self._pending = exc
                return -7
        return M.TOKEN_READ_FN(read)

    def train(self, corpus_iterable: Optional[Iterable[List[str]]] = None,
              corpus_file: Optional[_Path] = None, total_examples: Optional[int] = None,
              total_words: Optional[int] = None, epochs: Optional[int] = None,
              start_alpha: Optional[float] = None, end_alpha: Optional[float] = None,
              word_count: int = 0, queue_factor: int = 2, report_delay: float = 1.0,
              compute_loss: Optional[bool] = None, callbacks: Sequence[Any] = ()) -> Tuple[int, int]:
        """Trains the model whose vocabulary build_vocab made (or ``Word2Vec.load`` read) on
        corpus_iterable or corpus_file, in this process with the GIL released, and returns
        (words trained on, tokens read) as gensim's (effective words, raw words). Called
        again, or on a loaded model, it trains the vectors on (gensim's continued
        training): the vocabulary stays (words outside it are skipped) and the learning
        rate falls again from alpha. As gensim's, ``epochs`` (required) becomes
        ``self.epochs`` and ``start_alpha`` ``self.alpha``; the learning rate falls over
        ``total_words`` tokens per epoch, or over the corpus's tokens scaled to
        ``total_examples`` sentences (counted here, except in the first call with
        build_vocab's ``corpus_count``, where build_vocab's count is used).
        ``callbacks`` and ``compute_loss`` as gensim's (as there, the callbacks given to
        Word2Vec(...) serve the training it starts itself; train uses its own).
        RuntimeError before build_vocab; ValueError for missing counts or epochs;
        NotImplementedError for end_alpha other than 0.0001 or a word_count.
        KeyboardInterrupt after Ctrl-C (the model keeps its last step's vectors, and a
        later train goes on from them)."""
        if self._handle is None:
            raise RuntimeError("you must first build vocabulary before training the model")
        if end_alpha is not None and end_alpha != _NOT_YET["min_alpha"]:
            raise NotImplementedError(f"train: end_alpha={end_alpha!r} (the learning rate falls "
                                      "to alpha * 1e-4 as word2vec.c's; only gensim's default "
                                      "min_alpha 0.0001 is accepted)")
        if word_count:
            raise NotImplementedError("train: word_count")
        if (corpus_iterable is None) == (corpus_file is None):
            raise ValueError("train: give exactly one of corpus_iterable or corpus_file")
        if total_examples is None and total_words is None:
            raise ValueError("You must specify either total_examples or total_words, for "
                             "proper learning-rate and progress calculations.")
        if epochs is None or not 1 <= epochs <= 100000:
            raise ValueError("You must specify an explicit epochs count (in [1, 100000]).")
        if start_alpha is not None and not 0 < start_alpha <= 10:
            raise ValueError(f"train: start_alpha must be in (0, 10], not {start_alpha!r}")
        mm = M.models()
        path = None
        if corpus_file is not None:
            path = check_input_file(corpus_file, "train: corpus_file")
        else:
            _check_restartable(corpus_iterable, "corpus_iterable")
        words = self._epoch_words(corpus_iterable, path, total_examples, total_words)
        alpha = start_alpha or self.alpha
        self._set_options(words, epochs, alpha)
        self.epochs, self.alpha = epochs, alpha  # only once the options are taken
        if compute_loss is not None:
            self.compute_loss = bool(compute_loss)
        self._callbacks = self.callbacks = tuple(callbacks)  # gensim's: train's own only
        self._pending: Optional[BaseException] = None
        self._logstate = {"time": 0.0, "words": -1, "next": 0, "loss": 0.0, "n": 0}
        self.training_log, self.running_training_loss = [], 0.0
        for cb in self._callbacks:
            getattr(cb, "on_train_begin", lambda m: None)(self)
        for cb in self._callbacks:
            getattr(cb, "on_epoch_begin", lambda m: None)(self)
        res, err = M.W2VResult(), M.ModelError()
        self._trained = True  # from here on the tables are trained on (after a stop too)
        self._guard = M.SigintGuard()
        with self._guard:
            if path is not None:
                rc = mm.sg_w2v_train_file(self._handle.ptr, os.fsencode(path),
                                          ctypes.byref(res), ctypes.byref(err))
            else:
                reader = self._reader(corpus_iterable)
                rc = mm.sg_w2v_train_tokens(self._handle.ptr, reader, None, ctypes.byref(res),
                                            ctypes.byref(err))
        self._refresh_wv()
        self.result = res
        if self._pending is not None:
            raise self._pending
        self._guard.raise_if_hit()
        if rc:
            M.raise_error(err, "train", path)
        for cb in self._callbacks:
            getattr(cb, "on_train_end", lambda m: None)(self)
        return int(res.tokens), int(res.tokens)

    def _epoch_words(self, corpus: Any, path: Optional[str], total_examples: Optional[int],
                     total_words: Optional[int]) -> int:
        """The tokens per epoch the learning rate falls over (0: build_vocab's count)."""
        if total_words is not None:  # 0: build_vocab's count, as the C API takes it
            if total_words < 0:
                raise ValueError(f"train: total_words must be >= 0, not {total_words!r}")
            return int(total_words)
        if total_examples < 1:
            raise ValueError(f"train: total_examples must be >= 1, not {total_examples!r}")
        if not self._trained and total_examples == self.corpus_count:
            return 0
        words, sentences = self._count_corpus(corpus, path)
        return max(1, round(words * total_examples / max(sentences, 1)))

    @staticmethod
    def _count_corpus(corpus: Any, path: Optional[str]) -> Tuple[int, int]:
        """(tokens, sentences) of a corpus file (counted in C) or of sentences."""
        if path is None:
            words = sentences = 0
            for sentence in corpus:
                words += len(sentence)
                sentences += 1
            return words, sentences
        mm, err = M.models(), M.ModelError()
        v = mm.sg_vocab_new()
        if not v:
            raise MemoryError("train: out of memory")
        try:
            if mm.sg_vocab_count_file(v, os.fsencode(path), ctypes.byref(err)):
                M.raise_error(err, "train", path)
            return int(mm.sg_vocab_tokens(v)), int(mm.sg_vocab_lines(v))
        finally:
            mm.sg_vocab_free(v)

    def _set_options(self, epoch_words: int, epochs: int, alpha: float) -> None:
        """The coming training call's options: the model's, with epochs, alpha, this
        object's workers and event callback, and epoch_words (raises, the model's options
        unchanged, when the library refuses them)."""
        mm, err = M.models(), M.ModelError()
        o = mm.sg_w2v_options(self._handle.ptr)
        o.iter, o.alpha, o.threads, o.epoch_words = epochs, float(alpha), self.workers, epoch_words
        o.verbose, o.on_event = 0, self._event_callback()
        if mm.sg_w2v_set_options(self._handle.ptr, ctypes.byref(o), ctypes.byref(err)):
            M.raise_error(err, "train")

    def get_latest_training_loss(self) -> float:
        """The loss summed over the steps of the latest train call (compute_loss=True;
        0.0 otherwise), as gensim's running_training_loss."""
        return float(self.running_training_loss) if self.compute_loss else 0.0

    # ------------------------------------------------------------ files
    def save(self, fname: _Path) -> None:
        """Writes sgrad's model file (safetensors: tables, vocabulary with counts, options;
        sg_w2v_save), atomically; ``Word2Vec.load`` reads it. Not gensim's pickle.
        RuntimeError before build_vocab."""
        if self._handle is None:
            raise RuntimeError("save: the model has no vocabulary yet (build_vocab)")
        err = M.ModelError()
        path = os.fspath(fname)
        if M.models().sg_w2v_save(self._handle.ptr, os.fsencode(path), ctypes.byref(err)):
            M.raise_error(err, "save", path)

    @classmethod
    def load(cls, fname: _Path) -> "Word2Vec":
        """A model saved by ``save`` (or a checkpoint of sgrad-w2v -checkpoint) with the
        options it was trained with, for queries (``.wv``) or to train on (``train``,
        gensim's continued training; a checkpoint records no corpus token count, so give it
        ``total_words``). ``workers``: every core. FileNotFoundError for a missing file,
        sgrad.FormatError for a damaged one."""
        path = check_input_file(fname, "Word2Vec.load")
        err = M.ModelError()
        mm = M.models()
        ptr = mm.sg_w2v_load(os.fsencode(path), 0, ctypes.byref(err))
        if not ptr:
            M.raise_error(err, "Word2Vec.load", path)
        self = cls.__new__(cls)
        self._handle, self._trained = _Handle(ptr), True
        o = mm.sg_w2v_options(ptr)
        self.vector_size, self.window, self.negative, self.hs = o.size, o.window, o.negative, o.hs
        self.sg, self.sample, self.epochs, self.seed = 1 - o.cbow, o.sample, o.iter, o.seed
        self.alpha = o.alpha if o.alpha > 0 else (0.05 if o.cbow else 0.025)
        self.min_count, self.workers = o.min_count, max(1, mm.sg_w2v_threads(ptr))
        self.min_alpha, self.ns_exponent, self.cbow_mean, self.comment = 0.0001, 0.75, 1, None
        self.callbacks, self.compute_loss, self.running_training_loss = (), False, 0.0
        self.training_log = []
        self._refresh_wv()
        v = mm.sg_w2v_vocab(ptr)
        self.corpus_count, self.corpus_total_words = int(mm.sg_vocab_lines(v)), int(mm.sg_vocab_tokens(v))
        return self
