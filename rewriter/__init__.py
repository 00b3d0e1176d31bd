"""patterns.rewriter: automatic rewrites (libcst codemods + Jinja templates).

REWRITES maps a rewrite's name (as named in a pattern's transformation.rewrite)
to its implementation.
"""
from __future__ import annotations

from typing import Any

REWRITES: dict[str, Any] = {}
