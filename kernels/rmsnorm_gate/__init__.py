from .baseline import rmsnorm_gate
from .naive import naive_rmsnorm_gate
from .spec import SPEC

__all__ = ["rmsnorm_gate", "naive_rmsnorm_gate", "SPEC"]
