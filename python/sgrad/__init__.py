"""sgrad from Python: reverse-mode autodiff whose gradients can be sparse, over the C library
libsgrad.so (ctypes); every op, backward and optimizer step runs in C.

The package's modules: ``errors`` (one exception per failure kind), ``context`` (the C
context: threads, seed, the tape), ``tensor`` (Tensor, from_numpy, coo), ``dlpack``
(from_dlpack: memory shared with PyTorch and numpy), ``ops`` (the differentiable ops,
PyTorch's names), ``autograd`` (clipping, gradcheck), ``nn`` (modules and
``nn.functional``), ``optim`` (optimizers and learning-rate schedulers), the trainers
``Word2Vec``/``KeyedVectors``, ``fasttext`` and ``kge`` (knowledge-graph embeddings), and
``sgrad.torch`` (PyTorch modules whose tables live in sgrad; imported on demand, the only
module that imports torch).
This module only re-exports.
"""
from ._lib import lib
from ._args import F32, F64, I32, I64  # noqa: F401  (the C dtype codes)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .context import Context, default_context, no_grad
from .tensor import Tensor, coo, from_numpy
from .dlpack import from_dlpack
from .ops import *  # noqa: F401,F403
from .ops import __all__ as _ops_all
from .autograd import clip_grad_norm, clip_grad_value, gradcheck
from . import optim  # noqa: F401
from . import nn  # noqa: F401
from .word2vec import Word2Vec, KeyedVectors
from .checkpoint import save_checkpoint, load_checkpoint, read_checkpoint_meta
from .plot import plot_training
from . import fasttext  # noqa: F401
from . import kge  # noqa: F401

__version__ = lib.sg_version().decode()

__all__ = (["Context", "default_context", "no_grad", "Tensor", "from_numpy", "from_dlpack",
            "coo", "clip_grad_norm", "clip_grad_value", "gradcheck", "optim", "nn", "Word2Vec",
            "KeyedVectors", "save_checkpoint", "load_checkpoint", "read_checkpoint_meta",
            "plot_training", "fasttext", "kge"] + _errors_all + _ops_all)
