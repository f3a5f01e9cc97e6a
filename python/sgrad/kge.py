"""Knowledge-graph embeddings in-process: ``sgrad.kge.train(train, valid, test, ...)`` trains
TransE (L1 or L2), DistMult, ComplEx or RotatE through libsgrad_models (include/sgrad_kge.h)
and returns a ``KGEModel``; ``sgrad.kge.load(path)`` reads a model file (or a training
checkpoint) of ``sgrad-kge train`` or ``KGEModel.save``.

The options are the program's flags with '-' as '_' (``-chunk-negs`` is ``chunk_negs``);
an option left None takes the C default of the model (sg_kge_opts_default), so a call and
``sgrad-kge train`` with the same flags train bitwise the same model (for any ``threads``).
Training runs in the calling thread with the GIL released (ctypes); the library's event
callback takes it back to fill ``training_log``, call ``callbacks`` and watch for Ctrl-C
(KeyboardInterrupt after the run stopped at a step boundary; the exception's ``model`` is
the model of the last step).

Files are TSV, ``head<TAB>relation<TAB>tail`` a line. Errors: FileNotFoundError naming a
missing file, sgrad.FormatError (a ValueError) naming ``FILE:LINE`` for a malformed line
or the path of a damaged model file, ValueError (TypeError for a non-number) naming the
argument for a bad option, before anything is read; KeyError for a name the model does
not know.
"""
import ctypes
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _models as M
from .errors import ArgumentError, check_input_file

__all__ = ["train", "load", "KGEModel", "MODELS"]

_Path = Union[str, bytes, "os.PathLike"]

MODELS = ("transe_l1", "transe_l2", "distmult", "complex", "rotate")
_SG_ERR_INDEX = 6

# The enum options: their C name functions' stem (sg_kge_<stem>_parse / _name).
_ENUMS = ("model", "loss", "optim", "reg")
# The integer and real options with the ranges the program's flag parser accepts.
_INTS = {"dim": (1, 1 << 16), "epochs": (1, 1000000), "batch": (1, 1 << 24),
         "chunk": (1, 1 << 24), "negs": (0, 1 << 20), "chunk_negs": (0, 1),
         "reciprocal": (0, 1), "threads": (0, 4096), "seed": (0, 2 ** 63 - 1),
         "eval_every": (0, 1000000), "max_eval": (0, 2 ** 63 - 1),
         "save_every": (0, 2 ** 63 - 1)}
_REALS = {"margin": (-1e6, 1e6), "adv_temp": (0.0, 1e6), "reg_coef": (0.0, 1e6),
          "lr": (1e-12, 1e3), "init_scale": (0.0, 1e3)}
_FLAGS = _ENUMS + tuple(_INTS) + tuple(_REALS) + ("checkpoint", "resume")
# train's keyword order, which ``KGEModel.options`` keeps.
_OPTION_ORDER = ("model", "dim", "epochs", "batch", "chunk", "negs", "chunk_negs", "loss",
                 "margin", "adv_temp", "reciprocal", "reg", "reg_coef", "optim", "lr",
                 "threads", "seed", "eval_every", "max_eval", "checkpoint", "save_every",
                 "resume", "init_scale")


def _enc(s: str, what: str) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)
    if b"\0" in b:
        raise ValueError(f"{what}: {s!r} holds a NUL character")
    return b


def _dec(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _python_names(msg: str) -> str:
    """The library's message with each flag (-chunk-negs) as its argument (chunk_negs)."""
    def sub(m: Any) -> str:
        name = m.group(1).replace("-", "_")
        return name if name in _FLAGS else m.group(0)
    return re.sub(r"(?<![\w-])-([a-z][a-z0-9-]*)", sub, msg)


def _enum_value(mm: Any, kind: str, value: Any) -> int:
    out = ctypes.c_int()
    ok = isinstance(value, str) and "\0" not in value
    if not ok or getattr(mm, f"sg_kge_{kind}_parse")(value.encode(), ctypes.byref(out)):
        names, i = [], 0
        while getattr(mm, f"sg_kge_{kind}_name")(i):
            names.append(_dec(getattr(mm, f"sg_kge_{kind}_name")(i)))
            i += 1
        raise ValueError(f"train: {kind} must be one of {', '.join(names)}, not {value!r}")
    return out.value


def _number(name: str, value: Any) -> Any:
    """value checked against name's range (the program's); ValueError / TypeError naming it."""
    if name in _INTS:
        lo, hi = _INTS[name]
        if isinstance(value, bool) and hi == 1:
            value = int(value)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise TypeError(f"train: {name} must be an int, not {type(value).__name__}")
    else:
        lo, hi = _REALS[name]
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"train: {name} must be a number, not {type(value).__name__}")
    if not lo <= value <= hi:  # NaN fails too
        raise ValueError(f"train: {name} must be in [{lo}, {hi}], not {value!r}")
    return int(value) if name in _INTS else float(value)


def _options(given: Dict[str, Any]) -> Tuple[M.KGEOpts, List[bytes]]:
    """The C options: the model's defaults, then each option given (not None), checked here
    and by sg_kge_opts_check; also the encoded paths the options point into (keep them)."""
    mm = M.models()
    o = mm.sg_kge_opts_default(_enum_value(mm, "model", given["model"]))
    for name in _ENUMS[1:]:
        if given[name] is not None:
            setattr(o, name, _enum_value(mm, name, given[name]))
    for name in list(_INTS) + list(_REALS):
        if given[name] is not None:
            setattr(o, name, _number(name, given[name]))
    if given["threads"] is None:
        o.threads = 0  # every core; the model does not depend on it
    keep = []
    for name in ("checkpoint", "resume"):
        if given[name] is not None:
            p = os.fspath(given[name])
            keep.append(_enc(os.fsdecode(p), f"train: {name}"))
            setattr(o, name, keep[-1])
    v = given["verbose"]
    if not isinstance(v, (int, np.integer)) or not 0 <= v <= 10:
        raise ValueError(f"train: verbose must be an int in [0, 10], not {v!r}")
    o.verbose = int(v)
    err = M.ModelError()
    if mm.sg_kge_opts_check(ctypes.byref(o), ctypes.byref(err)):
        msg = _python_names(err.message.decode("utf-8", "replace"))
        raise ArgumentError(f"train: {msg}", err.status)
    if o.eval_every and given["valid"] is None:
        raise ValueError("train: eval_every needs valid (a validation file)")
    return o, keep


class _TableView:
    """The owner of a numpy view of a model table: numpy keeps this object as the array's
    base, and it keeps the model (so the table's memory) alive as long as the array."""

    def __init__(self, owner: "KGEModel", ptr: int, rows: int, cols: int):
        self._owner = owner
        self.__array_interface__ = {"version": 3, "shape": (rows, cols), "typestr": "<f4",
                                    "data": (ptr, True)}  # True: read-only


class KGEModel:
    """A knowledge-graph-embedding model held by libsgrad_models (an sg_kge handle), made by
    ``train`` or ``load``. Queries: ``evaluate``, ``predict_tails``, ``predict_heads``;
    tables: ``entity_vectors``, ``relation_vectors``; names: ``entity_names``,
    ``relation_names``, ``entity_index``, ``relation_index``; files: ``save``, ``export``.
    After ``train``: ``training_log`` (one dict per epoch: epoch, steps, loss,
    edges_per_sec, valid_mrr, elapsed_s, as the program's -log lines), ``result`` (the
    run's counts and timings) and ``test_metrics`` (with a test file, as the program
    prints them; else None)."""

    def __init__(self, ptr: int):
        self._ptr = ptr
        self._mm = M.models()
        self._names: Dict[int, List[str]] = {}
        self.training_log: List[Dict[str, Any]] = []
        self.result: Optional[Dict[str, Any]] = None
        self.test_metrics: Optional[Dict[str, Any]] = None

    def __del__(self) -> None:
        if getattr(self, "_ptr", None):
            self._mm.sg_kge_free(self._ptr)
            self._ptr = None

    def __repr__(self) -> str:
        o = self.options
        return (f"<sgrad.kge.KGEModel {o['model']} dim={o['dim']} "
                f"entities={self._mm.sg_kge_entities(self._ptr)} "
                f"relations={self._mm.sg_kge_relations(self._ptr)}>")

    # ------------------------------------------------------------ tables and names
    def _table(self, which: int) -> np.ndarray:
        rows, cols = ctypes.c_int64(), ctypes.c_int64()
        p = self._mm.sg_kge_table(self._ptr, which, ctypes.byref(rows), ctypes.byref(cols))
        if not p:
            raise RuntimeError("the model holds no tables")
        addr = ctypes.cast(p, ctypes.c_void_p).value
        return np.asarray(_TableView(self, addr, rows.value, cols.value))

    @property
    def entity_vectors(self) -> np.ndarray:
        """(entities, dim) float32: a read-only view of the model's entity table (no copy)
        that keeps the model alive as long as the array lives. Rows in ``entity_names``
        order; complex and rotate rows are K real parts then K imaginary parts. Take
        ``np.array(...)`` for a copy to change."""
        return self._table(0)

    @property
    def relation_vectors(self) -> np.ndarray:
        """(relation rows, rdim) float32, a read-only view as ``entity_vectors``. With
        reciprocal relations there are 2R rows: row R + r is the inverse of relation r.
        rdim is dim, except rotate's: dim / 2 phases."""
        return self._table(1)

    def _name_list(self, which: int) -> List[str]:
        if which not in self._names:
            count = (self._mm.sg_kge_entities, self._mm.sg_kge_relations)[which]
            name = (self._mm.sg_kge_entity_name, self._mm.sg_kge_relation_name)[which]
            self._names[which] = [_dec(name(self._ptr, i)) for i in range(count(self._ptr))]
        return self._names[which]

    @property
    def entity_names(self) -> List[str]:
        """The entities' names in row order (those of the training file first)."""
        return list(self._name_list(0))

    @property
    def relation_names(self) -> List[str]:
        """The relations' names in row order (R names, also with reciprocal relations)."""
        return list(self._name_list(1))

    def entity_index(self, name: str) -> int:
        """The row of an entity; KeyError naming it when the model has none."""
        i = self._mm.sg_kge_find_entity(self._ptr, _enc(name, "entity_index"))
        if i < 0:
            raise KeyError(f"entity {name!r} is not in the model")
        return int(i)

    def relation_index(self, name: str) -> int:
        """The row of a relation; KeyError naming it when the model has none."""
        i = self._mm.sg_kge_find_relation(self._ptr, _enc(name, "relation_index"))
        if i < 0:
            raise KeyError(f"relation {name!r} is not in the model")
        return int(i)

    @property
    def options(self) -> Dict[str, Any]:
        """The options in use, named as ``train``'s arguments (a loaded model: those of its
        file; checkpoint and resume None; threads 0 means every core)."""
        o = self._mm.sg_kge_options(self._ptr).contents
        out: Dict[str, Any] = {}
        for name in _OPTION_ORDER:
            v = getattr(o, name)
            if name in _ENUMS:
                v = _dec(getattr(self._mm, f"sg_kge_{name}_name")(v))
            elif name in ("checkpoint", "resume"):
                v = _dec(v) if v else None
            out[name] = v
        return out

    # ------------------------------------------------------------ queries
    def evaluate(self, test: _Path, filter: Union[_Path, Sequence[_Path]] = ()) -> Dict[str, Any]:
        """Filtered ranking of the triples of the TSV file test against every entity, tails
        and heads, the known triples of the ``filter`` files (a path or a sequence; none:
        raw ranking, as ``sgrad-kge eval`` without -filter) left out, ties ranked as their
        mean. A dict as the program's JSON line: mrr, hits@1, hits@3, hits@10, mr (means
        over 2 * count rankings), count (triples ranked), unseen (of those, naming a name
        not in the training file), unknown (left out: a name the model has no row for).
        With no triple ranked (count 0) the five means are None."""
        path = check_input_file(test, "evaluate: test")
        if isinstance(filter, (str, bytes, os.PathLike)):
            filter = [filter]
        fs = [_enc(check_input_file(f, "evaluate: filter"), "evaluate: filter") for f in filter]
        arr = (ctypes.c_char_p * max(len(fs), 1))(*fs)
        met, err = M.KGEMetrics(), M.ModelError()
        if self._mm.sg_kge_evaluate(self._ptr, _enc(path, "evaluate: test"), arr, len(fs),
                                    ctypes.byref(met), ctypes.byref(err)):
            M.raise_error(err, "evaluate", path)
        ranked = met.count > 0  # none ranked: the means are undefined, None as the JSON's null
        return {"mrr": met.mrr if ranked else None, "hits@1": met.hits1 if ranked else None,
                "hits@3": met.hits3 if ranked else None, "hits@10": met.hits10 if ranked else None,
                "mr": met.mr if ranked else None, "count": int(met.count),
                "unseen": int(met.unseen), "unknown": int(met.unknown)}

    def _predict(self, fn: Any, a: str, b: str, k: int, what: str) -> List[Tuple[str, float]]:
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ValueError(f"{what}: k must be an int >= 1, not {k!r}")
        n = int(min(k, max(self._mm.sg_kge_entities(self._ptr), 1)))
        rows, scores = (ctypes.c_int64 * n)(), (ctypes.c_float * n)()
        names, got, err = (ctypes.c_char_p * n)(), ctypes.c_int(), M.ModelError()
        if fn(self._ptr, _enc(a, what), _enc(b, what), n, rows, scores, names,
              ctypes.byref(got), ctypes.byref(err)):
            if err.status == _SG_ERR_INDEX:
                raise KeyError(f"{what}: {err.message.decode('utf-8', 'replace')}")
            M.raise_error(err, what)
        return [(_dec(names[i]), float(scores[i])) for i in range(got.value)]

    def predict_tails(self, head: str, relation: str, k: int = 10) -> List[Tuple[str, float]]:
        """The k best tails of (head, relation) as (entity name, score) pairs, best first
        (ties: the lower row first); scores as the model defines them (higher is better).
        KeyError naming a name the model does not know."""
        return self._predict(self._mm.sg_kge_predict_tails, head, relation, k, "predict_tails")

    def predict_heads(self, relation: str, tail: str, k: int = 10) -> List[Tuple[str, float]]:
        """The k best heads of (relation, tail), as ``predict_tails``."""
        return self._predict(self._mm.sg_kge_predict_heads, relation, tail, k, "predict_heads")

    # ------------------------------------------------------------ files
    def save(self, path: _Path) -> None:
        """Writes the model file (one safetensors file: tables, names, options), atomically;
        ``load`` and ``sgrad-kge eval|predict|export`` read it."""
        p = os.fsdecode(os.fspath(path))
        err = M.ModelError()
        if self._mm.sg_kge_save(self._ptr, _enc(p, "save"), ctypes.byref(err)):
            M.raise_error(err, "save", p)

    def export(self, dir: _Path) -> None:
        """Writes into the existing directory dir: entities.tsv and relations.tsv
        (``name<TAB>v1 v2 ...``), entities.npy and relations.npy (float32),
        entity_names.txt and relation_names.txt, as ``sgrad-kge export``.
        FileNotFoundError / NotADirectoryError for a dir that is not one."""
        import errno
        p = os.fsdecode(os.fspath(dir))
        if not os.path.exists(p):
            raise FileNotFoundError(errno.ENOENT, "export: no such directory", p)
        if not os.path.isdir(p):
            raise NotADirectoryError(errno.ENOTDIR, "export: not a directory", p)
        err = M.ModelError()
        if self._mm.sg_kge_export(self._ptr, _enc(p, "export"), ctypes.byref(err)):
            M.raise_error(err, "export", p)


class _Run:
    """One training call's event handling: the epoch records, the callbacks, verbose
    printing and Ctrl-C (a stop request from the callback; the exception raised after)."""

    def __init__(self, callbacks: Sequence[Any], verbose: int):
        self.model: Optional[KGEModel] = None  # set once the handle exists
        self.callbacks, self.verbose = tuple(callbacks), verbose
        self.pending: Optional[BaseException] = None
        self.guard = M.SigintGuard()
        self.epoch_edges, self.epoch_start = 0, 0.0
        self.fn = M.EVENT_FN(self._on_event)

    def call(self, hook: str) -> None:
        for cb in self.callbacks:
            getattr(cb, hook, lambda m: None)(self.model)

    def _epoch(self, e: Any) -> None:
        dt = e.elapsed_s - self.epoch_start
        rec = {"epoch": e.epoch, "steps": e.steps, "loss": e.loss,
               "edges_per_sec": self.epoch_edges / dt if dt > 0 else 0.0,
               "valid_mrr": e.valid_mrr if e.valid_mrr >= 0 else None, "elapsed_s": e.elapsed_s}
        self.model.training_log.append(rec)
        self.epoch_edges, self.epoch_start = 0, e.elapsed_s
        if self.verbose:
            mrr = f", valid mrr {e.valid_mrr:.6f}" if e.valid_mrr >= 0 else ""
            print(f"sgrad-kge: epoch {e.epoch}/{e.epochs}: loss {e.loss:.4f}, "
                  f"{rec['edges_per_sec']:.0f} edges/sec{mrr}, {e.elapsed_s:.1f} s",
                  file=sys.stderr, flush=True)
        self.call("on_epoch_end")
        if e.epoch < e.epochs:
            self.call("on_epoch_begin")

    def _on_event(self, ud: Any, ep: Any) -> int:
        if self.pending is not None or self.guard.hit:
            return 1  # asked to stop already: every event asks again until the run ends
        e = ep.contents
        try:
            if e.kind == M.EVENT_STEP:
                self.epoch_edges += e.examples
            elif e.kind == M.EVENT_EPOCH:
                self._epoch(e)
            elif e.kind == M.EVENT_INFO and e.message and self.verbose >= e.level:
                print("sgrad-kge: " + _dec(e.message), file=sys.stderr, flush=True)
            ctypes.pythonapi.PyErr_CheckSignals()  # raises KeyboardInterrupt after Ctrl-C
            return 0
        except BaseException as exc:  # noqa: B902  (Ctrl-C too: stop, raise it after)
            self.pending = exc
            return 1


def _result(res: M.KGEResult) -> Dict[str, Any]:
    out = {name: getattr(res, name) for name, _ in M.KGEResult._fields_}
    out["valid_mrr"] = res.valid_mrr if res.valid_mrr >= 0 else None
    return out


def train(train: _Path, valid: Optional[_Path] = None, test: Optional[_Path] = None, *,
          model: str = "complex", dim: Optional[int] = None, epochs: Optional[int] = None,
          batch: Optional[int] = None, chunk: Optional[int] = None, negs: Optional[int] = None,
          chunk_negs: Optional[int] = None, loss: Optional[str] = None,
          margin: Optional[float] = None, adv_temp: Optional[float] = None,
          reciprocal: Optional[int] = None, reg: Optional[str] = None,
          reg_coef: Optional[float] = None, optim: Optional[str] = None,
          lr: Optional[float] = None, threads: Optional[int] = None, seed: Optional[int] = None,
          eval_every: Optional[int] = None, max_eval: Optional[int] = None,
          checkpoint: Optional[_Path] = None, save_every: Optional[int] = None,
          resume: Optional[_Path] = None, init_scale: Optional[float] = None,
          verbose: int = 0, callbacks: Sequence[Any] = ()) -> KGEModel:
    """Trains a model on the TSV file train (valid: the validation ranking of eval_every;
    valid's and test's names get rows too) with ``sgrad-kge train``'s options (None: the
    model's default, sgrad_kge.h), in this process with the GIL released. With test, the
    result's ``test_metrics`` are its filtered ranking against train, valid and test, as
    the program prints them. ``callbacks``: objects with any of on_train_begin,
    on_epoch_begin, on_epoch_end, on_train_end (each takes the model; ``training_log[-1]``
    is the epoch just done; the vectors are those of the run so far: the tables are made
    once the files are read, so in on_train_begin and the first on_epoch_begin
    ``entity_vectors`` and ``relation_vectors`` raise RuntimeError). ``verbose`` >= 1
    prints the library's messages of that level and a line per epoch on stderr."""
    given = dict(locals())
    opts, keep = _options(given)
    paths = [check_input_file(train, "train: train")]
    for name, p in (("valid", valid), ("test", test)):
        paths.append(None if p is None else check_input_file(p, f"train: {name}"))
    if resume is not None:
        check_input_file(resume, "train: resume")
    return _train(opts, paths, callbacks, int(verbose))


def _train(opts: M.KGEOpts, paths: List[Optional[str]], callbacks: Sequence[Any],
           verbose: int) -> KGEModel:
    mm, err = M.models(), M.ModelError()
    run = _Run(callbacks, verbose)
    opts.on_event = run.fn
    ptr = mm.sg_kge_new(ctypes.byref(opts), ctypes.byref(err))
    if not ptr:
        M.raise_error(err, "train")
    model = run.model = KGEModel(ptr)
    model._event_fn = run.fn  # the handle keeps the pointer: the function lives as long
    enc = [None if p is None else _enc(p, "train") for p in paths]
    res = M.KGEResult()
    run.call("on_train_begin")
    run.call("on_epoch_begin")
    with run.guard:
        rc = mm.sg_kge_train_files(ptr, enc[0], enc[1], enc[2], ctypes.byref(res),
                                   ctypes.byref(err))
    try:
        if run.pending is None:
            run.guard.raise_if_hit()
    except KeyboardInterrupt as e:
        run.pending = e
    run.model = None  # the callback no longer needs it: no cycle through run.fn
    if run.pending is not None:
        run.pending.model = model if rc == M.SG_STOPPED else None  # the last step's model
        raise run.pending
    if rc:
        if res.refused:  # the checkpoint's options are named as flags: name them as here
            err.message = _python_names(err.message.decode("utf-8", "replace")).encode()[:1023]
        M.raise_error(err, "train", _missing(paths, opts))
    model.result = _result(res)
    if paths[2] is not None:
        filters = [paths[0], paths[1] or paths[2], paths[2]] if paths[1] else [paths[0], paths[2]]
        model.test_metrics = model.evaluate(paths[2], filter=filters)
    for cb in callbacks:
        getattr(cb, "on_train_end", lambda m: None)(model)
    return model


def _missing(paths: List[Optional[str]], opts: M.KGEOpts) -> Optional[str]:
    """The first input that is gone (a file removed after the checks), for the error."""
    cands = list(paths) + [_dec(opts.resume) if opts.resume else None]
    return next((p for p in cands if p is not None and not os.path.exists(p)), None)


def load(path: _Path, threads: Optional[int] = None) -> KGEModel:
    """A model file written by ``KGEModel.save`` or ``sgrad-kge train`` (or a training
    checkpoint), for queries on ``threads`` threads (None or 0: every core).
    FileNotFoundError for a missing file, sgrad.FormatError naming path for one that is
    not a model."""
    p = check_input_file(path, "load")
    if threads is not None and (not isinstance(threads, (int, np.integer)) or isinstance(threads, bool)
                                or not 0 <= threads <= 4096):
        raise ValueError(f"load: threads must be an int in [0, 4096], not {threads!r}")
    err = M.ModelError()
    ptr = M.models().sg_kge_load(_enc(p, "load"), int(threads or 0), ctypes.byref(err))
    if not ptr:
        M.raise_error(err, "load", p)
    return KGEModel(ptr)
