"""Finds and loads libsgrad_models.so (the trainers' library, include/sgrad_models.h and
include/sgrad_kge.h) and declares the C signatures and structs the package calls; each
Structure mirrors its C struct field for field, in order.

Search order, as _lib.py's for libsgrad.so: the SGRAD_MODELS_LIBRARY environment variable
(a path; an explicit choice, nothing else is tried), the libsgrad_models.so inside this
package's directory (`pip install ./python` copies it there), the build tree of the
repository this package sits in (build/libsgrad_models.so), then the loader's own search.
Without SGRAD_MODELS_LIBRARY, a libsgrad_models.so next to the loaded libsgrad.so is tried
first, so the pair always matches (SGRAD_LIBRARY=BUILD/libsgrad.so picks BUILD's models).

The library is loaded lazily (``models()``), so ``import sgrad`` works without it; it is
loaded with ctypes.CDLL, which releases the GIL around every call, and the event callback
takes it back (ctypes does) while it runs.
"""
import ctypes
import ctypes.util
import os
from typing import Any, Iterator, Optional

from . import _lib

c_int, c_int64, c_double, c_void_p, c_char_p = (ctypes.c_int, ctypes.c_int64, ctypes.c_double,
                                                ctypes.c_void_p, ctypes.c_char_p)
c_bool, c_uint64 = ctypes.c_bool, ctypes.c_uint64
P = c_void_p
I64P = ctypes.POINTER(c_int64)
F32P = ctypes.POINTER(ctypes.c_float)
F64P = ctypes.POINTER(c_double)

SG_STOPPED = 100
SG_W2V_OOV = -1
SG_W2V_EOS = -2
SG_MAX_WORD = 100
EVENT_STEP, EVENT_EPOCH, EVENT_SAVE, EVENT_END, EVENT_INFO = range(5)
FT_SUPERVISED, FT_SKIPGRAM, FT_CBOW = range(3)


class ModelError(ctypes.Structure):
    _fields_ = [("status", c_int), ("message", ctypes.c_char * 1024)]


class Event(ctypes.Structure):
    _fields_ = [("kind", c_int), ("epoch", c_int), ("epochs", c_int), ("words", c_int64),
                ("words_done", c_int64), ("total_words", c_int64), ("steps", c_int64),
                ("examples", c_int64), ("loss", c_double), ("lr", c_double),
                ("elapsed_s", c_double), ("threads", c_int), ("level", c_int),
                ("message", c_char_p), ("valid_mrr", c_double)]


EVENT_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(Event))
TOKEN_READ_FN = ctypes.CFUNCTYPE(c_int64, c_void_p, ctypes.POINTER(ctypes.c_int32), c_int64)


class W2VOpts(ctypes.Structure):
    _fields_ = [("size", c_int), ("window", c_int), ("negative", c_int), ("hs", c_int),
                ("iter", c_int), ("threads", c_int), ("cbow", c_int), ("hogwild", c_int),
                ("replicas", c_int), ("min_count", c_int64), ("batch", c_int64),
                ("sync_every", c_int64), ("save_every", c_int64), ("token_cache", c_int64),
                ("sample", c_double), ("alpha", c_double), ("seed", c_uint64),
                ("engine", c_int), ("checkpoint", c_char_p), ("resume", c_char_p),
                ("verbose", c_int), ("on_event", EVENT_FN), ("event_ud", c_void_p),
                ("merger", c_void_p), ("prefetch_min", c_int64), ("epoch_words", c_int64)]


class W2VResult(ctypes.Structure):
    _fields_ = [("seconds", c_double), ("words_per_sec_thread", c_double), ("threads", c_int),
                ("tokens", c_int64), ("final_loss", c_double), ("examples", c_int64),
                ("steps", c_int64), ("vocab_size", c_int64), ("t_forward", c_double),
                ("t_backward", c_double), ("t_draw", c_double), ("t_overlapped", c_double),
                ("t_sync", c_double), ("merges", c_int64), ("steps_one_thread", c_int64),
                ("epochs_replayed", c_int), ("refused", c_bool)]


class W2VEvalSection(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("total", c_int64), ("covered", c_int64),
                ("correct", c_int64)]


class W2VEval(ctypes.Structure):
    _fields_ = [("questions", c_int64), ("covered", c_int64), ("correct", c_int64),
                ("rows", c_int64), ("skipped", c_int64), ("first_skipped", c_int64),
                ("n_sections", c_int64), ("sections", ctypes.POINTER(W2VEvalSection))]


class FTOpts(ctypes.Structure):
    _fields_ = [("kind", c_int), ("label", c_char_p), ("dim", c_int), ("epoch", c_int),
                ("word_ngrams", c_int), ("minn", c_int), ("maxn", c_int), ("neg", c_int),
                ("threads", c_int), ("batch", c_int), ("bucket", c_int64),
                ("min_count", c_int64), ("min_count_label", c_int64), ("lr", c_double),
                ("seed", c_uint64), ("loss", c_int), ("verbose", c_int), ("ws", c_int),
                ("sample", c_double), ("lr_update_rate", c_int), ("on_event", EVENT_FN),
                ("event_ud", c_void_p)]


class FTResult(ctypes.Structure):
    _fields_ = [("examples", c_int64), ("no_label", c_int64), ("no_word", c_int64),
                ("steps", c_int64), ("seconds", c_double), ("final_loss", c_double)]


class KGEOpts(ctypes.Structure):
    """sgrad_kge.h's sg_kge_opts (the enums are C ints)."""
    _fields_ = [("model", c_int), ("dim", c_int), ("epochs", c_int), ("batch", c_int64),
                ("chunk", c_int64), ("negs", c_int64), ("chunk_negs", c_int), ("loss", c_int),
                ("margin", c_double), ("adv_temp", c_double), ("reciprocal", c_int),
                ("reg", c_int), ("reg_coef", c_double), ("optim", c_int), ("lr", c_double),
                ("init_scale", c_double), ("threads", c_int), ("seed", c_uint64),
                ("eval_every", c_int), ("max_eval", c_int64), ("checkpoint", c_char_p),
                ("save_every", c_int64), ("resume", c_char_p), ("verbose", c_int),
                ("on_event", EVENT_FN), ("event_ud", c_void_p)]


class KGEResult(ctypes.Structure):
    _fields_ = [("entities", c_int64), ("relations", c_int64), ("entities_train", c_int64),
                ("relations_train", c_int64), ("train_edges", c_int64), ("valid_edges", c_int64),
                ("test_edges", c_int64), ("steps", c_int64), ("edges", c_int64),
                ("epochs_done", c_int), ("seconds", c_double), ("edges_per_sec", c_double),
                ("final_loss", c_double), ("valid_mrr", c_double), ("refused", c_bool)]


class KGEMetrics(ctypes.Structure):
    _fields_ = [("mrr", c_double), ("hits1", c_double), ("hits3", c_double),
                ("hits10", c_double), ("mr", c_double), ("count", c_int64),
                ("unseen", c_int64), ("unknown", c_int64)]


E = ctypes.POINTER(ModelError)
CPP = ctypes.POINTER(c_char_p)
IP = ctypes.POINTER(c_int)

_SIGNATURES = {
    "sg_model_status_string": (c_char_p, [c_int]),
    "sg_lines_open": (P, [c_char_p, E]),
    "sg_lines_next": (c_int, [P, ctypes.POINTER(CPP), I64P, ctypes.POINTER(c_bool)]),
    "sg_lines_close": (None, [P]),
    "sg_vocab_new": (P, []),
    "sg_vocab_free": (None, [P]),
    "sg_vocab_add_packed": (c_int, [P, c_char_p, c_int64, I64P, c_int64, E]),
    "sg_vocab_count_file": (c_int, [P, c_char_p, E]),
    "sg_vocab_size": (c_int64, [P]),
    "sg_vocab_word": (c_char_p, [P, c_int64]),
    "sg_vocab_count": (c_int64, [P, c_int64]),
    "sg_vocab_tokens": (c_int64, [P]),
    "sg_vocab_lines": (c_int64, [P]),
    "sg_vocab_kept_tokens": (c_int64, [P]),
    "sg_w2v_opts_default": (W2VOpts, []),
    "sg_w2v_new": (P, [ctypes.POINTER(W2VOpts), E]),
    "sg_w2v_free": (None, [P]),
    "sg_w2v_options": (W2VOpts, [P]),
    "sg_w2v_set_options": (c_int, [P, ctypes.POINTER(W2VOpts), E]),
    "sg_w2v_threads": (c_int, [P]),
    "sg_w2v_build_vocab": (c_int, [P, c_char_p, P, E]),
    "sg_w2v_vocab": (P, [P]),
    "sg_w2v_train_file": (c_int, [P, c_char_p, ctypes.POINTER(W2VResult), E]),
    "sg_w2v_train_tokens": (c_int, [P, TOKEN_READ_FN, c_void_p, ctypes.POINTER(W2VResult), E]),
    "sg_w2v_save": (c_int, [P, c_char_p, E]),
    "sg_w2v_load": (P, [c_char_p, c_int, E]),
    "sg_w2v_load_vectors": (P, [c_char_p, c_int, E]),
    "sg_w2v_write_vectors": (c_int, [P, c_char_p, c_int, c_int, E]),
    "sg_w2v_table": (P, [P, c_int]),
    "sg_w2v_size": (c_int64, [P]),
    "sg_w2v_dim": (c_int64, [P]),
    "sg_w2v_word": (c_char_p, [P, c_int64]),
    "sg_w2v_find": (c_int64, [P, c_char_p]),
    "sg_w2v_lookup_packed": (c_int64, [P, c_char_p, c_int64, I64P, c_int64,
                                       ctypes.POINTER(ctypes.c_int32), c_int64, E]),
    "sg_w2v_evaluate": (c_int, [P, c_char_p, c_int64, ctypes.POINTER(W2VEval), E]),
    "sg_w2v_eval_free": (None, [ctypes.POINTER(W2VEval)]),
    "sg_ft_opts_default": (FTOpts, [c_int]),
    "sg_ft_opts_check": (c_int, [ctypes.POINTER(FTOpts), E]),
    "sg_ft_loss_parse": (c_int, [c_char_p, ctypes.POINTER(c_int)]),
    "sg_ft_train_file": (P, [c_char_p, ctypes.POINTER(FTOpts), ctypes.POINTER(FTResult), E]),
    "sg_ft_save": (c_int, [P, c_char_p, E]),
    "sg_ft_write_vectors": (c_int, [P, c_char_p, E]),
    "sg_ft_load": (P, [c_char_p, c_int, E]),
    "sg_ft_free": (None, [P]),
    "sg_ft_kind_of": (c_int, [P]),
    "sg_ft_dim": (c_int, [P]),
    "sg_ft_words": (c_int64, [P]),
    "sg_ft_word": (c_char_p, [P, c_int64]),
    "sg_ft_find_word": (c_int64, [P, c_char_p]),
    "sg_ft_labels": (c_int64, [P]),
    "sg_ft_label": (c_char_p, [P, c_int64]),
    "sg_ft_word_vector": (c_int, [P, c_char_p, F32P, E]),
    "sg_ft_sentence_vector": (c_int, [P, CPP, c_int64, c_bool, F32P, E]),
    "sg_ft_predict": (c_int, [P, CPP, c_int64, c_bool, F64P, I64P, I64P, c_int64, I64P, E]),
    "sg_ft_nearest": (c_int64, [P, F32P, c_int64, I64P, c_int, I64P, F64P]),
    "sg_kge_model_name": (c_char_p, [c_int]),
    "sg_kge_loss_name": (c_char_p, [c_int]),
    "sg_kge_optim_name": (c_char_p, [c_int]),
    "sg_kge_reg_name": (c_char_p, [c_int]),
    "sg_kge_model_parse": (c_int, [c_char_p, IP]),
    "sg_kge_loss_parse": (c_int, [c_char_p, IP]),
    "sg_kge_optim_parse": (c_int, [c_char_p, IP]),
    "sg_kge_reg_parse": (c_int, [c_char_p, IP]),
    "sg_kge_opts_default": (KGEOpts, [c_int]),
    "sg_kge_opts_check": (c_int, [ctypes.POINTER(KGEOpts), E]),
    "sg_kge_new": (P, [ctypes.POINTER(KGEOpts), E]),
    "sg_kge_free": (None, [P]),
    "sg_kge_train_files": (c_int, [P, c_char_p, c_char_p, c_char_p, ctypes.POINTER(KGEResult), E]),
    "sg_kge_evaluate": (c_int, [P, c_char_p, CPP, c_int, ctypes.POINTER(KGEMetrics), E]),
    "sg_kge_predict_tails": (c_int, [P, c_char_p, c_char_p, c_int, I64P, F32P, CPP, IP, E]),
    "sg_kge_predict_heads": (c_int, [P, c_char_p, c_char_p, c_int, I64P, F32P, CPP, IP, E]),
    "sg_kge_save": (c_int, [P, c_char_p, E]),
    "sg_kge_load": (P, [c_char_p, c_int, E]),
    "sg_kge_export": (c_int, [P, c_char_p, E]),
    "sg_kge_options": (ctypes.POINTER(KGEOpts), [P]),
    "sg_kge_entities": (c_int64, [P]),
    "sg_kge_relations": (c_int64, [P]),
    "sg_kge_entities_train": (c_int64, [P]),
    "sg_kge_relations_train": (c_int64, [P]),
    "sg_kge_entity_name": (c_char_p, [P, c_int64]),
    "sg_kge_relation_name": (c_char_p, [P, c_int64]),
    "sg_kge_find_entity": (c_int64, [P, c_char_p]),
    "sg_kge_find_relation": (c_int64, [P, c_char_p]),
    "sg_kge_table": (F32P, [P, c_int, I64P, I64P]),
}


def _candidates() -> Iterator[str]:
    env = os.environ.get("SGRAD_MODELS_LIBRARY")
    if env:
        yield env
        return
    if os.sep in _lib.path:  # beside the libsgrad.so that was loaded: a matching pair
        yield os.path.join(os.path.dirname(os.path.abspath(_lib.path)), "libsgrad_models.so")
    pkg = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(pkg, "libsgrad_models.so")
    repo = os.path.dirname(os.path.dirname(pkg))
    if os.path.exists(os.path.join(repo, "CMakeLists.txt")):
        yield os.path.join(repo, "build", "libsgrad_models.so")
    found = ctypes.util.find_library("sgrad_models")
    if found:
        yield found
    yield "libsgrad_models.so"
    yield "libsgrad_models.so.0"


_loaded: Optional[Any] = None
path: Optional[str] = None


def models() -> Any:
    """The loaded libsgrad_models (ctypes.CDLL, signatures declared); ImportError saying
    where it was looked for."""
    global _loaded, path
    if _loaded is not None:
        return _loaded
    tried = []
    for cand in dict.fromkeys(_candidates()):
        if os.sep in cand and not os.path.exists(cand):
            tried.append(cand + " (absent)")
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            tried.append(f"{cand} ({e})")
            continue
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _loaded, path = lib, cand
        return lib
    raise ImportError("sgrad: cannot load libsgrad_models.so (the trainers' library); install "
                      "the package with `pip install ./python`, build it in a checkout "
                      "(build/libsgrad_models.so), or set SGRAD_MODELS_LIBRARY to its path. "
                      "Tried: " + "; ".join(tried))


def raise_error(err: ModelError, what: str, path_arg: Optional[str] = None) -> None:
    """Raises the sgrad exception of err (a failed sgrad_models call), its message
    prefixed by ``what``; a missing file (SG_ERR_IO with ENOENT's text) is
    FileNotFoundError naming ``path_arg``. KeyboardInterrupt for SG_STOPPED is the
    caller's business."""
    import errno
    from .errors import _ERROR_OF, Error
    msg = err.message.decode("utf-8", "replace")
    status = err.status or 7
    if status == 10 and "No such file or directory" in msg:
        raise FileNotFoundError(errno.ENOENT, f"{what}: {msg}", path_arg)
    raise _ERROR_OF.get(status, Error)(f"{what}: {msg}" if msg else what, status)


def tokens_of(text: str) -> list:
    """A line's tokens as the C reader cuts them (runs of bytes other than space, DEL and
    the other control bytes), as bytes."""
    import re
    return [t for t in re.split(rb"[\x00-\x20\x7f]+", text.encode("utf-8", "surrogateescape"))
            if t]


class SigintGuard:
    """Ctrl-C during a training call: while it runs (in the main thread), SIGINT only sets
    ``hit``, which the event callback turns into a stop request (a KeyboardInterrupt raised
    inside a ctypes callback would be lost); on leaving, the previous handler is back and
    ``raise_if_hit`` raises KeyboardInterrupt (or runs that handler) once the run stopped."""

    def __init__(self) -> None:
        self.hit = False
        self.old: Any = None
        self.installed = False

    def _on(self, signum: int, frame: Any) -> None:
        self.hit = True

    def __enter__(self) -> "SigintGuard":
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._on)
            self.installed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal
        if self.installed:
            signal.signal(signal.SIGINT, self.old)
            self.installed = False

    def raise_if_hit(self) -> None:
        """After __exit__: what the previous handler does with the SIGINT that came."""
        import signal
        if not self.hit:
            return
        self.hit = False
        if callable(self.old) and self.old is not signal.default_int_handler:
            self.old(signal.SIGINT, None)
        elif self.old != signal.SIG_IGN:
            raise KeyboardInterrupt
