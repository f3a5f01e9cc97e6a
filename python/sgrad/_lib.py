"""Finds and loads libsgrad.so and declares the C signatures the package calls.

Search order: the SGRAD_LIBRARY environment variable (a path to the .so; an explicit choice,
not second-guessed: nothing else is tried), the libsgrad.so inside this package's directory
(an installed package: `pip install ./python` builds it with CMake and puts it there), the
build tree of the repository this package sits in (build/libsgrad.so, as `make python`
builds it, for PYTHONPATH=python), then the loader's own search (an installed prefix:
ctypes.util.find_library, then plain "libsgrad.so" / "libsgrad.so.0"). `path` is what was
loaded (a file path, or the bare name handed to the loader).

The library is loaded with ctypes.CDLL, which releases the GIL for the duration of every
foreign call, so other Python threads run while a long C call (a step, a backward) works.
"""
import ctypes
import ctypes.util
import os

c_int, c_int64, c_double, c_void_p, c_char_p = (ctypes.c_int, ctypes.c_int64, ctypes.c_double,
                                                ctypes.c_void_p, ctypes.c_char_p)
P = c_void_p  # every sgrad handle (sg_ctx *, sg_tensor *, sg_optim *, sg_wordvec *)
I64P = ctypes.POINTER(c_int64)


def _candidates():
    env = os.environ.get("SGRAD_LIBRARY")
    if env:
        yield env
        return  # an explicit choice is not second-guessed
    pkg = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(pkg, "libsgrad.so")  # installed by pip (setup.py copies it here)
    repo = os.path.dirname(os.path.dirname(pkg))
    if os.path.exists(os.path.join(repo, "CMakeLists.txt")):  # python/sgrad of a checkout
        yield os.path.join(repo, "build", "libsgrad.so")
    found = ctypes.util.find_library("sgrad")
    if found:
        yield found
    yield "libsgrad.so"
    yield "libsgrad.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("sgrad: cannot load libsgrad.so; install the package with "
                      "`pip install --no-index --no-build-isolation ./python` (builds the "
                      "library into it), or from a checkout build it with `make python` "
                      "(build/libsgrad.so, with PYTHONPATH=python), or set SGRAD_LIBRARY to "
                      "its path. Tried: " + "; ".join(tried))


lib, path = _load()  # path: the file (or loader name) that was loaded


class CtxOpts(ctypes.Structure):
    _fields_ = [("alloc", c_void_p), ("free", c_void_p), ("ud", c_void_p), ("threads", c_int),
                ("nondeterministic", c_int), ("seed", ctypes.c_uint64)]


class EmbeddingOpts(ctypes.Structure):
    _fields_ = [("padding_idx", c_int64), ("max_norm", c_double), ("fused", c_void_p)]


class EmbeddingBagOpts(ctypes.Structure):
    _fields_ = [("mode", c_int), ("per_sample_weights", c_void_p), ("padding_idx", c_int64),
                ("include_last_offset", c_int), ("fused", c_void_p), ("grad", c_int)]


class SgnsOpts(ctypes.Structure):
    _fields_ = [("fused", c_void_p)]


class RankLossOpts(ctypes.Structure):
    _fields_ = [("kind", c_int), ("margin", c_double), ("adv_temp", c_double),
                ("skip_offset", c_int64)]


class SgdOpts(ctypes.Structure):
    _fields_ = [("lr", c_double), ("momentum", c_double), ("dampening", c_double),
                ("weight_decay", c_double), ("nesterov", c_int)]


class AdagradOpts(ctypes.Structure):
    _fields_ = [("lr", c_double), ("lr_decay", c_double), ("weight_decay", c_double),
                ("initial_accumulator", c_double), ("eps", c_double)]


class AdamOpts(ctypes.Structure):
    _fields_ = [("lr", c_double), ("beta1", c_double), ("beta2", c_double), ("eps", c_double),
                ("weight_decay", c_double), ("decoupled", c_int)]


class GradcheckOpts(ctypes.Structure):
    _fields_ = [("eps", c_double), ("atol", c_double), ("rtol", c_double), ("masked", c_int)]


class GradcheckResult(ctypes.Structure):
    _fields_ = [("passed", c_int), ("input", c_int), ("element", c_int64), ("output", c_int64),
                ("analytical", c_double), ("numerical", c_double), ("max_abs_err", c_double)]


class MemStats(ctypes.Structure):
    _fields_ = [("bytes_in_use", ctypes.c_size_t), ("peak_bytes", ctypes.c_size_t),
                ("arena_bytes", ctypes.c_size_t)]


class CheckpointMeta(ctypes.Structure):
    _fields_ = [("n", c_int64), ("keys", ctypes.POINTER(c_char_p)),
                ("values", ctypes.POINTER(c_char_p))]


GRADCHECK_FN = ctypes.CFUNCTYPE(c_void_p, c_void_p, ctypes.POINTER(c_void_p), c_void_p)

_SIGNATURES = {
    # name: (restype, argtypes)
    "sg_version": (c_char_p, []),
    "sg_status_string": (c_char_p, [c_int]),
    "sg_ctx_new": (P, [ctypes.POINTER(CtxOpts)]),
    "sg_ctx_free": (None, [P]),
    "sg_ctx_status": (c_int, [P]),
    "sg_ctx_message": (c_char_p, [P]),
    "sg_ctx_clear_error": (None, [P]),
    "sg_ctx_threads": (c_int, [P]),
    "sg_ctx_set_threads": (None, [P, c_int]),
    "sg_ctx_deterministic": (c_int, [P]),
    "sg_ctx_mem_stats": (MemStats, [P]),
    "sg_rand_uniform": (c_double, [P]),
    "sg_tensor_new": (P, [P, c_int, c_int, I64P]),
    "sg_tensor_from_data": (P, [P, c_int, c_int, I64P, c_void_p]),
    "sg_tensor_wrap": (P, [P, c_int, c_int, I64P, c_void_p]),
    "sg_tensor_new_tmp": (P, [P, c_int, c_int, I64P]),
    "sg_tensor_free": (None, [P]),
    "sg_tensor_requires_grad": (P, [P, c_int]),
    "sg_tensor_get_requires_grad": (c_int, [P]),
    "sg_tensor_dtype": (c_int, [P]),
    "sg_tensor_layout": (c_int, [P]),
    "sg_tensor_ndim": (c_int, [P]),
    "sg_tensor_shape": (I64P, [P]),
    "sg_tensor_numel": (c_int64, [P]),
    "sg_tensor_data": (c_void_p, [P]),
    "sg_tensor_fill": (c_int, [P, c_double]),
    "sg_tensor_fill_uniform": (c_int, [P, c_double, c_double]),
    "sg_tensor_copy": (c_int, [P, P]),
    "sg_coo_new": (P, [P, c_int, c_int, I64P, c_int, c_int64, I64P, c_void_p]),
    "sg_coo_sparse_dim": (c_int, [P]),
    "sg_coo_dense_dim": (c_int, [P]),
    "sg_coo_nnz": (c_int64, [P]),
    "sg_coo_is_coalesced": (c_int, [P]),
    "sg_coo_indices": (P, [P]),
    "sg_coo_values": (P, [P]),
    "sg_coalesce": (P, [P]),
    "sg_index_add_": (c_int, [P, P]),
    "sg_index_add_scaled_": (c_int, [P, P, c_double]),
    "sg_backward": (c_int, [P]),
    "sg_backward_grad": (c_int, [P, P]),
    "sg_tensor_grad": (P, [P]),
    "sg_tape_reset": (None, [P]),
    "sg_set_grad_enabled": (c_int, [P, c_int]),
    "sg_tape_nodes": (c_int64, [P]),
    "sg_scale": (P, [P, c_double]),
    "sg_sum_dim": (P, [P, c_int, c_int]),
    "sg_mean_dim": (P, [P, c_int, c_int]),
    "sg_softmax": (P, [P, c_int]),
    "sg_log_softmax": (P, [P, c_int]),
    "sg_reshape": (P, [P, c_int, I64P]),
    "sg_transpose": (P, [P, c_int, c_int]),
    "sg_concat": (P, [c_int, ctypes.POINTER(c_void_p)]),
    "sg_embedding": (P, [P, P, ctypes.POINTER(EmbeddingOpts)]),
    "sg_embedding_bag": (P, [P, P, P, ctypes.POINTER(EmbeddingBagOpts)]),
    "sg_index_select": (P, [P, c_int, P]),
    "sg_slice": (P, [P, c_int64, c_int64]),
    "sg_to_sparse": (P, [P, c_int]),
    "sg_sgns_loss": (P, [P, P, P, ctypes.POINTER(SgnsOpts)]),
    "sg_hs_loss": (P, [P, P, P, P, P]),
    "sg_cdist": (P, [P, P, c_int]),
    "sg_rowdist": (P, [P, P, c_int]),
    "sg_complex_mul": (P, [P, P, ctypes.c_bool]),
    "sg_ranking_loss": (P, [P, P, ctypes.POINTER(RankLossOpts)]),
    "sg_gradcheck": (c_int, [P, GRADCHECK_FN, c_void_p, c_int, ctypes.POINTER(c_void_p),
                             ctypes.POINTER(GradcheckOpts), ctypes.POINTER(GradcheckResult)]),
    "sg_optim_sgd": (P, [P, ctypes.POINTER(SgdOpts)]),
    "sg_optim_adagrad": (P, [P, ctypes.POINTER(AdagradOpts)]),
    "sg_optim_rowwise_adagrad": (P, [P, ctypes.POINTER(AdagradOpts)]),
    "sg_optim_adam": (P, [P, ctypes.POINTER(AdamOpts)]),
    "sg_optim_lazy_adam": (P, [P, ctypes.POINTER(AdamOpts)]),
    "sg_optim_free": (None, [P]),
    "sg_optim_add_param": (c_int, [P, P]),
    "sg_optim_param_count": (c_int64, [P]),
    "sg_optim_step": (c_int, [P]),
    "sg_optim_flush": (c_int, [P]),
    "sg_optim_set_check_finite": (c_int, [P, c_int]),
    "sg_optim_set_lr": (c_int, [P, c_double]),
    "sg_optim_lr": (c_double, [P]),
    "sg_optim_steps": (c_int64, [P]),
    "sg_optim_state_count": (c_int, [P, P]),
    "sg_optim_state": (P, [P, P, c_int, ctypes.POINTER(c_char_p)]),
    "sg_optim_param": (P, [P, c_int64]),
    "sg_optim_set_steps": (c_int, [P, c_int64]),
    "sg_optim_lr_runs": (c_int64, [P, P, I64P, ctypes.POINTER(c_double), c_int64]),
    "sg_optim_set_lr_runs": (c_int, [P, P, I64P, ctypes.POINTER(c_double), c_int64]),
    "sg_optim_zero_grad": (c_int, [P]),
    "sg_grads_count": (c_int64, [P]),
    "sg_grads_param": (P, [P, c_int64]),
    "sg_clip_grad_norm": (c_int, [P, c_double, ctypes.POINTER(c_double)]),
    "sg_clip_grad_value": (c_int, [P, c_double]),
    "sg_wordvec_write": (c_int, [c_char_p, P, ctypes.POINTER(c_char_p), c_int]),
    "sg_checkpoint_save": (c_int, [P, c_char_p, ctypes.POINTER(c_void_p), c_int64,
                                   ctypes.POINTER(c_char_p), P, ctypes.POINTER(CheckpointMeta)]),
    "sg_checkpoint_load": (c_int, [P, c_char_p, ctypes.POINTER(c_void_p), c_int64,
                                   ctypes.POINTER(c_char_p), P, ctypes.POINTER(CheckpointMeta)]),
    "sg_checkpoint_read_meta": (c_int, [P, c_char_p, ctypes.POINTER(CheckpointMeta)]),
    "sg_checkpoint_meta_free": (None, [P, ctypes.POINTER(CheckpointMeta)]),
    "sg_wordvec_read": (P, [P, c_char_p, c_int]),
    "sg_wordvec_free": (None, [P]),
    "sg_wordvec_count": (c_int64, [P]),
    "sg_wordvec_dim": (c_int64, [P]),
    "sg_wordvec_word": (c_char_p, [P, c_int64]),
    "sg_wordvec_vectors": (P, [P]),
    "sg_pow": (P, [P, c_double]),
    "sg_clamp": (P, [P, ctypes.POINTER(c_double), ctypes.POINTER(c_double)]),
    "sg_where": (P, [P, P, P]),
    "sg_gather": (P, [P, c_int, P]),
    "sg_narrow": (P, [P, c_int, c_int64, c_int64]),
    "sg_norm_dim": (P, [P, c_double, c_int, c_int]),
    "sg_logsumexp_dim": (P, [P, c_int, c_int]),
    "sg_max_dim": (P, [P, c_int, c_int, ctypes.POINTER(c_void_p)]),
    "sg_dropout": (P, [P, c_double, c_int]),
    "sg_layer_norm": (P, [P, c_int64, P, P, c_double]),
}
# Binary and unary ops share two signatures.
for _name in ("add", "sub", "mul", "div", "matmul", "rowdot", "cross_entropy",
              "bce_with_logits", "sparse_mask", "maximum", "minimum"):
    _SIGNATURES["sg_" + _name] = (P, [P, P])
for _name in ("sum", "mean", "relu", "sigmoid", "tanh", "exp", "log", "log_sigmoid",
              "to_dense", "abs", "sqrt", "cos", "sin"):
    _SIGNATURES["sg_" + _name] = (P, [P])

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
