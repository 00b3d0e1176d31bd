from .baseline import kda_decode
from .naive import naive_kda_decode
from .spec import SPEC

__all__ = ["kda_decode", "naive_kda_decode", "SPEC"]
