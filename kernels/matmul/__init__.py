from .baseline import matmul
from .naive import naive_matmul
from .spec import SPEC

__all__ = ["matmul", "naive_matmul", "SPEC"]
