"""Modules and parameters in the spirit of ``torch.nn``, small: a Module registers the
Parameters and Modules assigned to its attributes, lists them, switches train/eval mode
and gives its state as numpy arrays. Layers: Embedding, EmbeddingBag, Linear, Dropout,
LayerNorm, ReLU, Sigmoid, Tanh, Sequential.

Where sgrad differs from PyTorch: a module's forward records on its Context's tape, which
``ctx.tape_reset()`` (or ``optimizer.zero_grad()``) clears after each step; Embedding and
EmbeddingBag always give a sparse (COO) gradient, and can apply a fused optimizer to the
rows they touch during their own backward (``fused=``).
"""
import collections
import os
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._args import supported_dtype
from ..checkpoint import load_checkpoint, save_checkpoint
from ..context import Context, default_context
from ..errors import ShapeError
from ..tensor import Tensor, _aligned_empty, _wrap_new_array
from . import functional as F
from . import init

if TYPE_CHECKING:  # for the annotations only: sgrad.optim is not imported at run time
    from ..optim import Optimizer

_Path = Union[str, bytes, "os.PathLike"]
_TensorLike = Union[Tensor, np.ndarray, float, int]
_Indices = Union[Tensor, np.ndarray, Sequence[int], Sequence[Sequence[int]]]

__all__ = ["Parameter", "Module", "Embedding", "EmbeddingBag", "Linear", "Dropout",
           "LayerNorm", "ReLU", "Sigmoid", "Tanh", "Sequential"]


class Parameter(Tensor):
    """A persistent dense tensor that a Module registers as a parameter: a copy of
    ``data`` (array-like; float32/float64, other floats refused with DtypeError) in
    ``ctx`` (default: the default Context), requiring grad unless told otherwise."""

    def __init__(self, data: Any, requires_grad: bool = True, ctx: Optional[Context] = None,
                 dtype: Any = None):
        ctx = ctx or default_context()
        src = np.asarray(data)
        a = _aligned_empty(src.shape, supported_dtype(dtype if dtype is not None else src.dtype))
        np.copyto(a, src, casting="unsafe")
        _wrap_new_array(self, ctx, a)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("sgrad.Tensor"):]


class Module:
    """Base class of layers and models: assign Parameters and Modules as attributes in
    ``__init__`` (after ``super().__init__()``), write ``forward``, call the module."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("Module.__init__() must be called before assigning "
                                 f"attributes ({type(self).__name__}.{name})")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation, usually returning a step Tensor; subclasses define it, and
        calling the module calls it (there are no hooks). NotImplementedError here."""
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # -- what a module holds
    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """(name, module) for each direct submodule, in assignment order."""
        return iter(self._modules.items())

    def children(self) -> Iterator["Module"]:
        """The direct submodules."""
        return (m for _, m in self.named_children())

    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
        """(dotted name, module) for this module and every submodule, depth first."""
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(prefix + ("." if prefix else "") + name)

    def modules(self) -> Iterator["Module"]:
        """This module and every submodule."""
        return (m for _, m in self.named_modules())

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Parameter]]:
        """(dotted name, parameter) for every parameter, each once, in assignment order."""
        seen = set()
        for mname, m in self.named_modules(prefix):
            for pname, p in m._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield mname + ("." if mname else "") + pname, p

    def parameters(self) -> Iterator[Parameter]:
        """Every parameter, each once: what an optimizer takes."""
        return (p for _, p in self.named_parameters())

    # -- modes
    def train(self, mode: bool = True) -> "Module":
        """Sets training mode (Dropout drops) on this module and every submodule."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> "Module":
        """Sets evaluation mode (Dropout is the identity); same as ``train(False)``."""
        return self.train(False)

    # -- state
    def state_dict(self) -> "collections.OrderedDict[str, np.ndarray]":
        """{dotted name: numpy array} of every parameter. As PyTorch's, the arrays share
        memory with the parameters (a later step changes them): copy them (``{k:
        v.copy() ...}``) to keep a snapshot."""
        return collections.OrderedDict((n, p.numpy()) for n, p in self.named_parameters())

    def load_state_dict(self, state_dict: Dict[str, Any],
                        strict: bool = True) -> Tuple[List[str], List[str]]:
        """Copies arrays into the parameters of the same names. Every name, shape and
        dtype is checked before anything is written: KeyError lists missing and unexpected
        names (with strict; without, only the names present are loaded), ShapeError a
        shape that differs (a ValueError), DtypeError (a TypeError) a dtype sgrad has no
        tensor for; values are converted to each parameter's dtype. Returns
        (missing_keys, unexpected_keys), two lists of names (PyTorch returns a named
        tuple of the same two lists)."""
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
        pairs = []
        for name, p in own.items():
            if name not in state_dict:
                continue
            a = np.asarray(state_dict[name])
            if a.shape != p.shape:
                raise ShapeError(f"load_state_dict: {name} has shape {a.shape}, the "
                                 f"parameter {p.shape}", 3)
            supported_dtype(a.dtype)  # DtypeError for float16 and the like
            pairs.append((p, a))
        for p, a in pairs:
            p.numpy()[...] = a
        return missing, unexpected

    def save_checkpoint(self, path: _Path, optim: Optional["Optimizer"] = None,
                        meta: Optional[Dict[str, str]] = None) -> None:
        """Writes the parameters (by their state_dict names), ``optim``'s state and
        ``meta`` to a safetensors checkpoint, atomically (sgrad.save_checkpoint)."""
        save_checkpoint(path, dict(self.named_parameters()), optim=optim, meta=meta)

    def load_checkpoint(self, path: _Path,
                        optim: Optional["Optimizer"] = None) -> Dict[str, str]:
        """Restores the parameters (and ``optim``'s state, steps and schedule) from a file
        that save_checkpoint wrote, exactly (sgrad.load_checkpoint); returns the metadata.
        FileNotFoundError for a missing file, sgrad.FormatError for a damaged one."""
        return load_checkpoint(path, dict(self.named_parameters()), optim=optim)

    def extra_repr(self) -> str:
        """The arguments shown in the module's repr."""
        return ""

    def __repr__(self) -> str:
        lines = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def _ctx_dtype(ctx: Optional[Context], dtype: Any) -> Tuple[Context, np.dtype]:
    return ctx or default_context(), supported_dtype(dtype)


class Embedding(Module):
    """A table of ``num_embeddings`` rows of ``embedding_dim`` (weight initialised N(0, 1),
    the ``padding_idx`` row zero, as PyTorch). ``forward(input)``: int indices of any shape
    (...) -> (..., embedding_dim). The weight's gradient is always COO (PyTorch's
    ``sparse=True``): one row per index. ``max_norm``: looked-up rows are renormalised in
    place to at most that L2 norm. ``fused``: an optimizer holding ``weight`` whose update
    the backward applies to the touched rows directly (set it after building the
    optimizer: ``emb.fused = opt``). IndexRangeError (an IndexError) for an index out of
    range, before anything is written."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                 fused: Optional["Optimizer"] = None, dtype: Any = np.float32,
                 ctx: Optional[Context] = None):
        super().__init__()
        ctx, dtype = _ctx_dtype(ctx, dtype)
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.fused = padding_idx, max_norm, fused
        self.weight = Parameter(np.zeros((num_embeddings, embedding_dim), dtype), ctx=ctx)
        init.normal_(self.weight)
        if padding_idx is not None:
            self.weight.numpy()[padding_idx] = 0

    def forward(self, input: _Indices) -> Tensor:
        """The rows of ``weight`` at int indices ``input`` (any shape (...)): a step Tensor
        (..., embedding_dim) of the weight's dtype (``sgrad.nn.functional.embedding``).
        IndexRangeError (an IndexError) for an index out of range, DtypeError (a
        TypeError) for indices that are not integers."""
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           fused=self.fused)

    def extra_repr(self) -> str:
        """``num_embeddings, embedding_dim`` and padding_idx when set."""
        return f"{self.num_embeddings}, {self.embedding_dim}" + (
            f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class EmbeddingBag(Module):
    """Sums, means or maxes bags of rows of a table (weight N(0, 1) as PyTorch).
    ``forward(input, offsets=None, per_sample_weights=None)``: ``input`` 1-D int with
    ``offsets`` (B) giving each bag's start (or B+1 with ``include_last_offset``), or 2-D
    (B, L) int without offsets (B bags of L) -> (B, embedding_dim). The weight's gradient
    is COO; ``fused`` as Embedding's."""

    def __init__(self, num_embeddings: int, embedding_dim: int, mode: str = "mean",
                 padding_idx: Optional[int] = None, include_last_offset: bool = False,
                 fused: Optional["Optimizer"] = None, dtype: Any = np.float32,
                 ctx: Optional[Context] = None):
        super().__init__()
        ctx, dtype = _ctx_dtype(ctx, dtype)
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.padding_idx, self.include_last_offset, self.fused = (
            padding_idx, include_last_offset, fused)
        self.weight = Parameter(np.zeros((num_embeddings, embedding_dim), dtype), ctx=ctx)
        init.normal_(self.weight)
        if padding_idx is not None:
            self.weight.numpy()[padding_idx] = 0

    def forward(self, input: _Indices, offsets: Optional[_Indices] = None,
                per_sample_weights: Optional[_TensorLike] = None) -> Tensor:
        """One row per bag: the sum, mean or max (``mode``) of the rows of ``weight`` at the
        bag's indices, a step Tensor (B, embedding_dim) (``sgrad.nn.functional
        .embedding_bag``). ``input`` 1-D with ``offsets`` or 2-D (B, L) without;
        ``per_sample_weights`` (input's shape) scales each row (mode "sum"). IndexRangeError
        (an IndexError) for an index or offset out of range, ArgumentError (a ValueError)
        for offsets that do not start at 0."""
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx, fused=self.fused)

    def extra_repr(self) -> str:
        """``num_embeddings, embedding_dim, mode``."""
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features) and bias
    (out_features), both initialised U(-1/sqrt(in_features), 1/sqrt(in_features)) as
    PyTorch. ``forward(x)``: (..., in_features) -> (..., out_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: Any = np.float32, ctx: Optional[Context] = None):
        super().__init__()
        ctx, dtype = _ctx_dtype(ctx, dtype)
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / np.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(np.zeros((out_features, in_features), dtype), ctx=ctx)
        init.uniform_(self.weight, -bound, bound)
        if bias:
            self.bias = Parameter(np.zeros(out_features, dtype), ctx=ctx)
            init.uniform_(self.bias, -bound, bound)
        else:
            self.bias = None

    def forward(self, x: _TensorLike) -> Tensor:
        """``x @ weight.T + bias``: (..., in_features) -> a step Tensor (..., out_features).
        An array is converted to the weight's dtype; a Tensor x of another float dtype
        raises DtypeError (a TypeError), x's last dim other than in_features ShapeError (a
        ValueError)."""
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        """``in_features, out_features, bias``."""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Dropout(Module):
    """Zeroes each element with probability ``p`` and scales the rest by 1/(1-p) in
    training mode, from the context's random stream (deterministic for a seed and any
    thread count); the identity in eval mode."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: _TensorLike) -> Tensor:
        """``x`` with dropout applied in training mode (a step Tensor of x's shape and
        dtype), ``x`` itself in eval mode (``sgrad.nn.functional.dropout``)."""
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        """``p``."""
        return f"p={self.p}"


class LayerNorm(Module):
    """Normalises over the last dimension (``normalized_shape``: an int or a 1-tuple; only
    the last dimension is supported), then scales by ``weight`` (ones) and shifts by
    ``bias`` (zeros) when ``elementwise_affine``. Biased variance, as PyTorch."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, dtype: Any = np.float32,
                 ctx: Optional[Context] = None):
        super().__init__()
        ctx, dtype = _ctx_dtype(ctx, dtype)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        if len(shape) != 1:
            raise ValueError(f"LayerNorm: only the last dimension is normalised, got "
                             f"normalized_shape {shape}")
        self.normalized_shape, self.eps = shape, eps
        if elementwise_affine:
            self.weight = Parameter(np.ones(shape, dtype), ctx=ctx)
            self.bias = Parameter(np.zeros(shape, dtype), ctx=ctx)
        else:
            self.weight = self.bias = None

    def forward(self, x: _TensorLike) -> Tensor:
        """``x`` (..., normalized_shape[0]) normalised over its last dimension, scaled and
        shifted: a step Tensor of x's shape (``sgrad.nn.functional.layer_norm``).
        ShapeError (a ValueError) when x's last dim differs."""
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        """``normalized_shape, eps``."""
        return f"{self.normalized_shape}, eps={self.eps}"


class ReLU(Module):
    """max(x, 0) elementwise."""

    def forward(self, x: _TensorLike) -> Tensor:
        """max(x, 0) elementwise, a step Tensor of x's shape and dtype."""
        return F.relu(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise."""

    def forward(self, x: _TensorLike) -> Tensor:
        """1 / (1 + exp(-x)) elementwise, a step Tensor of x's shape and dtype."""
        return F.sigmoid(x)


class Tanh(Module):
    """tanh(x) elementwise."""

    def forward(self, x: _TensorLike) -> Tensor:
        """tanh(x) elementwise, a step Tensor of x's shape and dtype."""
        return F.tanh(x)


class Sequential(Module):
    """Calls its modules in order, each on the previous one's output; they are named
    "0", "1", ... as PyTorch's, so state_dict keys match."""

    def __init__(self, *modules: Module):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a "
                                "Module")
            setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        """Calls each module in order on the previous one's output and returns the last
        output (``x`` itself for an empty Sequential)."""
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())
