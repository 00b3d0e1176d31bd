"""patterns: an optimization-pattern knowledge base for GPU kernels."""

__version__ = "0.1.0"
