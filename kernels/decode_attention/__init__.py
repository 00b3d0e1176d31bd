from .baseline import decode_attention
from .naive import naive_decode_attention
from .spec import SPEC

__all__ = ["decode_attention", "naive_decode_attention", "SPEC"]
