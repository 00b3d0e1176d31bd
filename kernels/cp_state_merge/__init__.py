from .baseline import cp_state_merge
from .naive import naive_cp_state_merge
from .spec import SPEC

__all__ = ["cp_state_merge", "naive_cp_state_merge", "SPEC"]
