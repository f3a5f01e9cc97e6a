"""Neural-network building blocks in the spirit of ``torch.nn``: ``Module`` and
``Parameter``, the layers embedding models need, and ``nn.functional``."""
from . import functional, init  # noqa: F401
from .modules import (Dropout, Embedding, EmbeddingBag, LayerNorm, Linear, Module,
                      Parameter, ReLU, Sequential, Sigmoid, Tanh)

__all__ = ["Module", "Parameter", "Embedding", "EmbeddingBag", "Linear", "Dropout",
           "LayerNorm", "ReLU", "Sigmoid", "Tanh", "Sequential", "functional", "init"]
