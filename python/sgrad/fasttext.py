"""fastText from Python, named as the ``fasttext`` module's and run in-process by
libsgrad_models (include/sgrad_models.h): ``sgrad.fasttext.train_supervised(input=...)``,
``train_unsupervised(input=..., model="skipgram"|"cbow")``, ``load_model(path)``, and a
model (``FastText``) with ``predict``, ``test``, ``test_label``, ``get_word_vector``,
``get_sentence_vector``, ``get_nearest_neighbors``, ``get_analogies``, ``get_words``,
``get_labels``, ``get_input_matrix``, ``get_output_matrix``, ``get_dimension``,
``save_model``.

Training runs in the calling thread with the GIL released (ctypes); the library's event
callback takes it back to watch for Ctrl-C (KeyboardInterrupt, raised after the run
stopped at a step boundary). With the same arguments a model is the file
``sgrad-fasttext supervised|skipgram|cbow`` writes with the same flags, byte for byte.
predict scores every label in C (sg_ft_predict) and returns fastText's probabilities
(exp of log(p + 1e-5), as the ``fasttext`` module's); a text is one line, and gets the
end-of-line word </s> as a line of a file does.

Arguments: lrUpdateRate is accepted and has no effect (the learning rate falls every
step, in the C library as in the program); ``thread`` sets the threads (the model does not
depend on it); ``batch`` (sgrad's, examples per step; 1 is fastText's per-example SGD).
pretrainedVectors and the autotune arguments are not supported (NotImplementedError)."""
import ctypes
import json
import os
import struct
import tempfile
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _models as M
from .errors import check_input_file

__all__ = ["train_supervised", "train_unsupervised", "load_model", "FastText"]

_Path = Union[str, bytes, "os.PathLike"]


def _dec(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _line(text: str, what: str) -> Any:
    if not isinstance(text, str):
        raise TypeError(f"{what}: texts must be str")
    if "\n" in text:
        raise ValueError(f"{what} processes one line at a time (remove '\\n')")
    toks = M.tokens_of(text)
    return (ctypes.c_char_p * max(len(toks), 1))(*toks), len(toks)


class FastText:
    """A fastText model held by libsgrad_models (an sg_ft handle): a classifier
    (train_supervised, or a supervised model file) or word vectors (train_unsupervised).
    Made by the module's functions, not directly."""

    def __init__(self, ptr: int):
        self._ptr = ptr
        mm = self._mm = M.models()
        self._kind = mm.sg_ft_kind_of(ptr)
        self._dim = mm.sg_ft_dim(ptr)
        self.words = [_dec(mm.sg_ft_word(ptr, i)) for i in range(mm.sg_ft_words(ptr))]
        self.labels = [_dec(mm.sg_ft_label(ptr, i)) for i in range(mm.sg_ft_labels(ptr))]

    def __del__(self) -> None:
        if getattr(self, "_ptr", None):
            self._mm.sg_ft_free(self._ptr)
            self._ptr = None

    @property
    def is_supervised(self) -> bool:
        """Whether this is a classifier (else word vectors)."""
        return self._kind == M.FT_SUPERVISED

    def get_dimension(self) -> int:
        """The vectors' dimension (dim)."""
        return int(self._dim)

    def get_words(self, include_freq: bool = False, on_unicode_error: str = "strict") -> Any:
        """The words (with </s>), in the model's row order (most frequent first); with
        include_freq, (words, counts array) where the model file keeps counts (word
        vectors); NotImplementedError for a classifier's words (its file keeps none)."""
        if not include_freq:
            return list(self.words)
        counts = self._tensors().get("words/counts")
        if counts is None:
            raise NotImplementedError("get_words(include_freq=True): a classifier's model "
                                      "file keeps no word counts")
        return list(self.words), np.asarray(counts, np.int64)

    def get_labels(self, include_freq: bool = False, on_unicode_error: str = "strict") -> Any:
        """The labels, in the model's row order (most frequent first); with include_freq,
        (labels, counts array) for a classifier (NotImplementedError for word vectors,
        whose file keeps no label counts)."""
        if not include_freq:
            return list(self.labels)
        counts = self._tensors().get("labels/counts")
        if counts is None:
            raise NotImplementedError("get_labels(include_freq=True): this model file "
                                      "keeps no label counts")
        return list(self.labels), np.asarray(counts, np.int64)

    def _check_k(self, k: int) -> int:
        n = len(self.labels)
        return n if k is None or k <= 0 or k > n else int(k)

    def _predict_one(self, text: str, k: int, threshold: float) -> Tuple[Tuple[str, ...], np.ndarray]:
        toks, n = _line(text, "predict")
        C = len(self.labels)
        score = (ctypes.c_double * max(C, 1))()
        gold = (ctypes.c_int64 * max(C, 1))()
        inputs, n_gold, err = ctypes.c_int64(), ctypes.c_int64(), M.ModelError()
        if self._mm.sg_ft_predict(self._ptr, toks, n, True, score, ctypes.byref(inputs), gold,
                                  C, ctypes.byref(n_gold), ctypes.byref(err)):
            M.raise_error(err, "predict")
        if not inputs.value:
            return (), np.zeros(0, np.float64)
        s = np.frombuffer(score, np.float64, C)
        best = np.argsort(-s, kind="stable")[:k]  # ties: the lower row first, as the program
        if threshold > 0:
            best = [b for b in best if s[b] >= np.log(threshold + 1e-5)]
        return tuple(self.labels[b] for b in best), np.exp(s[list(best)])

    def predict(self, text: Union[str, Sequence[str]], k: int = 1, threshold: float = 0.0,
                on_unicode_error: str = "strict") -> Any:
        """The k most likely labels of a text (a str: one line, no newline) and their
        probabilities: (labels tuple, float64 array), most likely first (ties: the lower
        row); k <= 0: all labels; those with probability below threshold left out. A list
        of texts gives (list of label tuples, list of arrays). A text with no known word
        and no n-gram row gives ((), empty array). ValueError for a text with a newline;
        ValueError for word vectors (not a classifier)."""
        if not self.is_supervised:
            raise ValueError("predict: this model holds word vectors, not a classifier")
        kk = self._check_k(k)
        if isinstance(text, str):
            return self._predict_one(text, kk, threshold)
        out = [self._predict_one(t, kk, threshold) for t in text]
        return [o[0] for o in out], [o[1] for o in out]

    def _eval(self, path: _Path, k: int, threshold: float) -> Tuple[int, int, int, int, Any]:
        if not self.is_supervised:
            raise ValueError("test: this model holds word vectors, not a classifier")
        p = check_input_file(path, "test")
        err = M.ModelError()
        mm = self._mm
        lines = mm.sg_lines_open(os.fsencode(p), ctypes.byref(err))
        if not lines:
            M.raise_error(err, "test", p)
        C = len(self.labels)
        kk = self._check_k(k)
        min_score = np.log(threshold + 1e-5) if threshold > 0 else -np.inf
        score = (ctypes.c_double * max(C, 1))()
        gold = (ctypes.c_int64 * max(C, 1))()
        inputs, n_gold = ctypes.c_int64(), ctypes.c_int64()
        toks, n_tok, eol = M.CPP(), ctypes.c_int64(), ctypes.c_bool()
        n_ex = hits = predicted = n_gold_all = 0
        per = np.zeros((max(C, 1), 3), np.int64)  # per label: gold, predicted, hits
        try:
            while True:
                more = mm.sg_lines_next(lines, ctypes.byref(toks), ctypes.byref(n_tok),
                                        ctypes.byref(eol))
                if more < 0:
                    raise OSError(f"test: error reading {p}")
                if more == 0:
                    break
                if mm.sg_ft_predict(self._ptr, toks, n_tok.value, eol.value, score,
                                    ctypes.byref(inputs), gold, C, ctypes.byref(n_gold),
                                    ctypes.byref(err)):
                    M.raise_error(err, "test", p)
                if not n_gold.value or not inputs.value:
                    continue
                s = np.frombuffer(score, np.float64, C)
                best = [b for b in np.argsort(-s, kind="stable")[:kk] if s[b] >= min_score]
                g = set(gold[:n_gold.value])
                n_ex += 1
                predicted += len(best)
                n_gold_all += len(g)
                hits += sum(1 for b in best if b in g)
                for b in best:
                    per[b, 1] += 1
                    per[b, 2] += b in g
                for b in g:
                    per[b, 0] += 1
        finally:
            mm.sg_lines_close(lines)
        return n_ex, hits, predicted, n_gold_all, per

    def test(self, path: _Path, k: int = 1, threshold: float = 0.0) -> Tuple[int, float, float]:
        """(N, P@k, R@k) over the labelled lines of the file at path (lines with a label
        and a known word or n-gram), as fastText's test (and ``sgrad-fasttext test``, which
        prints them to 3 digits). FileNotFoundError for a missing file."""
        n, hits, predicted, gold, _ = self._eval(path, k, threshold)
        return n, hits / predicted if predicted else 0.0, hits / gold if gold else 0.0

    def test_label(self, path: _Path, k: int = 1, threshold: float = 0.0) -> dict:
        """Per label, {label: {"precision", "recall", "f1score"}} over the file at path, as
        the ``fasttext`` module's test_label."""
        _, _, _, _, per = self._eval(path, k, threshold)
        out = {}
        for i, lab in enumerate(self.labels):
            g, pr, h = (int(x) for x in per[i])
            p = h / pr if pr else float("nan")
            r = h / g if g else float("nan")
            f = 2 * p * r / (p + r) if pr and g and p + r > 0 else float("nan")
            out[lab] = {"precision": p, "recall": r, "f1score": f}
        return out

    def get_word_vector(self, word: str) -> np.ndarray:
        """A token's vector (float32, dim): the mean of its word row and character n-gram
        rows; zeros without any (sg_ft_word_vector)."""
        out = np.zeros(self._dim, np.float32)
        err = M.ModelError()
        if self._mm.sg_ft_word_vector(self._ptr, word.encode("utf-8", "surrogateescape"),
                                      out.ctypes.data_as(M.F32P), ctypes.byref(err)):
            M.raise_error(err, "get_word_vector")
        return out

    def get_sentence_vector(self, text: str) -> np.ndarray:
        """A line's vector (fastText's getSentenceVector): a classifier's mean of its input
        rows, word vectors' mean of its words' unit vectors. ValueError for a newline."""
        toks, n = _line(text, "get_sentence_vector")
        out = np.zeros(self._dim, np.float32)
        err = M.ModelError()
        if self._mm.sg_ft_sentence_vector(self._ptr, toks, n, True,
                                          out.ctypes.data_as(M.F32P), ctypes.byref(err)):
            M.raise_error(err, "get_sentence_vector")
        return out

    def _nearest(self, q: np.ndarray, k: int, ban: List[int]) -> List[Tuple[float, str]]:
        k = max(0, min(int(k), len(self.words)))
        best = (ctypes.c_int64 * max(k, 1))()
        sim = (ctypes.c_double * max(k, 1))()
        b = (ctypes.c_int64 * max(len(ban), 1))(*ban)
        q = np.ascontiguousarray(q, np.float32)
        n = self._mm.sg_ft_nearest(self._ptr, q.ctypes.data_as(M.F32P), k, b, len(ban), best, sim)
        if n < 0:
            raise MemoryError("get_nearest_neighbors: out of memory")
        return [(float(sim[i]), self.words[best[i]]) for i in range(n)]

    def get_nearest_neighbors(self, word: str, k: int = 10,
                              on_unicode_error: str = "strict") -> List[Tuple[float, str]]:
        """The k words nearest by cosine to word's vector (the word itself left out), as
        (similarity, word) pairs, most similar first (the ``fasttext`` module's)."""
        i = self._mm.sg_ft_find_word(self._ptr, word.encode("utf-8", "surrogateescape"))
        return self._nearest(self.get_word_vector(word), k, [i])

    def get_analogies(self, wordA: str, wordB: str, wordC: str, k: int = 10,
                      on_unicode_error: str = "strict") -> List[Tuple[float, str]]:
        """The k words nearest to A - B + C of unit vectors (fastText's), A, B and C left
        out, as (similarity, word) pairs."""
        q = np.zeros(self._dim, np.float32)
        ban = []
        for w, s in ((wordA, 1.0), (wordB, -1.0), (wordC, 1.0)):
            v = self.get_word_vector(w)
            q = (q + (s / (np.sqrt(float(np.dot(v.astype(np.float64), v))) + 1e-8)) * v).astype(np.float32)
            ban.append(self._mm.sg_ft_find_word(self._ptr, w.encode("utf-8", "surrogateescape")))
        return self._nearest(q, k, ban)

    def _tensors(self) -> dict:
        """The model file's tensors as numpy arrays (read from a saved copy)."""
        with tempfile.TemporaryDirectory(prefix="sgrad-ft-") as tmp:
            path = os.path.join(tmp, "m.bin")
            self.save_model(path)
            data = open(path, "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            lo, hi = info["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + lo:8 + n + hi],
                                      dtypes[info["dtype"]]).reshape(info["shape"]).copy()
        return out

    def get_input_matrix(self) -> np.ndarray:
        """The input table as fastText's: (words + bucket, dim) float32, the words' rows
        then the n-gram buckets' (a copy; buckets never trained are zero)."""
        t = self._tensors()
        if "input/words" not in t:
            raise NotImplementedError("get_input_matrix: this model file has no input table")
        words = t["input/words"]
        bucket = int(self._meta("fasttext.bucket"))
        full = np.zeros((words.shape[0] + bucket, self._dim), np.float32)
        full[:words.shape[0]] = words
        rows = t.get("input/bucket_rows")
        if rows is not None and rows.size:
            full[words.shape[0] + rows] = t["input/bucket_values"]
        return full

    def get_output_matrix(self) -> np.ndarray:
        """The output table (a copy, float32): a classifier's label rows, word vectors'
        context rows."""
        return self._tensors()["output"]

    def _meta(self, key: str) -> str:
        from .checkpoint import read_checkpoint_meta
        with tempfile.TemporaryDirectory(prefix="sgrad-ft-") as tmp:
            path = os.path.join(tmp, "m.bin")
            self.save_model(path)
            return read_checkpoint_meta(path)[key]

    def save_model(self, path: _Path) -> None:
        """Writes the model file (sgrad's fastText model, a safetensors file) to path,
        atomically; ``load_model`` and ``sgrad-fasttext`` read it."""
        p = os.fspath(path)
        err = M.ModelError()
        if self._mm.sg_ft_save(self._ptr, os.fsencode(p), ctypes.byref(err)):
            M.raise_error(err, "save_model", p)


def load_model(path: _Path) -> FastText:
    """A model saved by save_model or written by ``sgrad-fasttext`` (a classifier or word
    vectors). FileNotFoundError for a missing file, sgrad.FormatError (a ValueError) naming
    path for a damaged or foreign file."""
    p = check_input_file(path, "load_model")
    err = M.ModelError()
    mm = M.models()
    ptr = mm.sg_ft_load(os.fsencode(p), M.FT_SUPERVISED, ctypes.byref(err))
    if not ptr and err.status == 7:  # not a classifier: word vectors?
        err2 = M.ModelError()
        ptr = mm.sg_ft_load(os.fsencode(p), M.FT_SKIPGRAM, ctypes.byref(err2))
    if not ptr:
        M.raise_error(err, "load_model", p)
    return FastText(ptr)


def _on_event_factory(state: dict) -> Any:
    def on_event(ud: Any, ep: Any) -> int:
        e = ep.contents
        if state["pending"] is not None or state["guard"].hit:
            return 1  # asked to stop already: every event asks again until the run ends
        try:
            if e.kind == M.EVENT_INFO and e.message and state["verbose"] >= e.level:
                print(_dec(e.message), flush=True)
            ctypes.pythonapi.PyErr_CheckSignals()
            return 0
        except BaseException as exc:  # noqa: B902  (Ctrl-C: stop, raise it after)
            state["pending"] = state["pending"] or exc
            return 1
    return M.EVENT_FN(on_event)


def _train(kind: int, what: str, input: _Path, args: dict) -> FastText:
    path = check_input_file(input, f"{what}: input")
    mm = M.models()
    o = mm.sg_ft_opts_default(kind)
    checks = [("lr", args["lr"] > 0 and args["lr"] < 1e3), ("dim", 1 <= args["dim"] <= 1 << 16),
              ("ws", args["ws"] >= 1), ("epoch", 1 <= args["epoch"] <= 1 << 20),
              ("minCount", args["minCount"] >= 0), ("minCountLabel", args["minCountLabel"] >= 0),
              ("minn", 0 <= args["minn"] <= M.SG_MAX_WORD),
              ("maxn", 0 <= args["maxn"] < M.SG_MAX_WORD), ("neg", args["neg"] >= 1),
              ("wordNgrams", 1 <= args["wordNgrams"] <= 100),
              ("bucket", 0 <= args["bucket"] <= 2 ** 31 - 1),
              ("thread", 1 <= args["thread"] <= 1 << 16),
              ("lrUpdateRate", args["lrUpdateRate"] >= 1), ("t", 0 <= args["t"] <= 1),
              ("verbose", 0 <= args["verbose"] <= 10), ("seed", 0 <= args["seed"] < 2 ** 63),
              ("batch", args["batch"] is None or 1 <= args["batch"] <= 1 << 20)]
    for name, ok in checks:
        if not ok:
            raise ValueError(f"{what}: bad value for {name}: {args[name]!r}")
    loss = ctypes.c_int()
    if mm.sg_ft_loss_parse(str(args["loss"]).encode(), ctypes.byref(loss)):
        raise ValueError(f"{what}: bad value for loss: {args['loss']!r} (softmax, ns, hs or ova)")
    label = args["label"].encode("utf-8", "surrogateescape")
    o.label, o.dim, o.epoch, o.word_ngrams = label, args["dim"], args["epoch"], args["wordNgrams"]
    o.minn, o.maxn, o.neg, o.threads = args["minn"], args["maxn"], args["neg"], args["thread"]
    if args["batch"] is not None:  # None: the C default of the kind (1 classifier, 8192 vectors)
        o.batch = args["batch"]
    o.bucket, o.min_count, o.min_count_label = args["bucket"], args["minCount"], args["minCountLabel"]
    o.lr, o.seed, o.loss, o.verbose = float(args["lr"]), args["seed"], loss.value, args["verbose"]
    o.ws, o.sample, o.lr_update_rate = args["ws"], float(args["t"]), args["lrUpdateRate"]
    state = {"pending": None, "verbose": args["verbose"], "guard": M.SigintGuard()}
    fn = _on_event_factory(state)
    o.on_event = fn
    err = M.ModelError()
    if mm.sg_ft_opts_check(ctypes.byref(o), ctypes.byref(err)):
        M.raise_error(err, what)
    res = M.FTResult()
    with state["guard"]:
        ptr = mm.sg_ft_train_file(os.fsencode(path), ctypes.byref(o), ctypes.byref(res),
                                  ctypes.byref(err))
    model = FastText(ptr) if ptr else None
    try:
        if state["pending"] is None:
            state["guard"].raise_if_hit()
    except KeyboardInterrupt as e:
        state["pending"] = e
    if state["pending"] is not None:
        state["pending"].model = model  # the model of the last step (None if none)
        raise state["pending"]
    if not ptr:
        M.raise_error(err, what, path)
    model.result = res
    return model


def _unsupported(what: str, pretrainedVectors: str, extra: dict) -> None:
    if pretrainedVectors:
        raise NotImplementedError(f"{what}: pretrainedVectors")
    for name in extra:
        raise NotImplementedError(f"{what}: {name} (not supported by sgrad)")


def train_supervised(input: _Path, lr: float = 0.1, dim: int = 100, ws: int = 5,
                     epoch: int = 5, minCount: int = 1, minCountLabel: int = 0, minn: int = 0,
                     maxn: int = 0, neg: int = 5, wordNgrams: int = 1, loss: str = "softmax",
                     bucket: int = 2000000, thread: Optional[int] = None,
                     lrUpdateRate: int = 100, t: float = 1e-4, label: str = "__label__",
                     verbose: int = 2, pretrainedVectors: str = "", seed: int = 0,
                     batch: Optional[int] = None, **kwargs: Any) -> FastText:
    """Trains a classifier on the file ``input`` (lines of labels and words) in this
    process, with the ``fasttext`` module's arguments and defaults (thread None: all
    CPUs but one; batch: sgrad's examples per step, None the library's default for a
    classifier, 1, fastText's per-example SGD). ValueError naming a
    bad argument (before training), FileNotFoundError for a missing input,
    KeyboardInterrupt after Ctrl-C (its ``model`` attribute holds the model of the
    last step); INFO lines up to ``verbose`` are printed."""
    _unsupported("train_supervised", pretrainedVectors, kwargs)
    if thread is None:
        thread = max(1, (os.cpu_count() or 2) - 1)
    return _train(M.FT_SUPERVISED, "train_supervised", input, dict(
        lr=lr, dim=dim, ws=ws, epoch=epoch, minCount=minCount, minCountLabel=minCountLabel,
        minn=minn, maxn=maxn, neg=neg, wordNgrams=wordNgrams, loss=loss, bucket=bucket,
        thread=thread, lrUpdateRate=lrUpdateRate, t=t, label=label, verbose=verbose,
        seed=seed, batch=batch))


def train_unsupervised(input: _Path, model: str = "skipgram", lr: float = 0.05, dim: int = 100,
                       ws: int = 5, epoch: int = 5, minCount: int = 5, minCountLabel: int = 0,
                       minn: int = 3, maxn: int = 6, neg: int = 5, wordNgrams: int = 1,
                       loss: str = "ns", bucket: int = 2000000, thread: Optional[int] = None,
                       lrUpdateRate: int = 100, t: float = 1e-4, label: str = "__label__",
                       verbose: int = 2, pretrainedVectors: str = "", seed: int = 0,
                       batch: Optional[int] = None, **kwargs: Any) -> FastText:
    """Trains subword word vectors (``model`` "skipgram" or "cbow") on the file ``input``
    in this process, with the ``fasttext`` module's arguments and defaults. Errors as
    train_supervised's (batch None: the library's default for vectors, sgrad-fasttext's);
    ValueError naming ``model`` for another model."""
    _unsupported("train_unsupervised", pretrainedVectors, kwargs)
    kinds = {"skipgram": M.FT_SKIPGRAM, "cbow": M.FT_CBOW}
    if model not in kinds:
        raise ValueError(f"train_unsupervised: bad value for model: {model!r} (skipgram or cbow)")
    if thread is None:
        thread = max(1, (os.cpu_count() or 2) - 1)
    return _train(kinds[model], "train_unsupervised", input, dict(
        lr=lr, dim=dim, ws=ws, epoch=epoch, minCount=minCount, minCountLabel=minCountLabel,
        minn=minn, maxn=maxn, neg=neg, wordNgrams=wordNgrams, loss=loss, bucket=bucket,
        thread=thread, lrUpdateRate=lrUpdateRate, t=t, label=label, verbose=verbose,
        seed=seed, batch=batch))
