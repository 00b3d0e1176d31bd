"""patterns.rewriter: automatic rewrites (libcst codemods + Jinja templates).

REWRITES maps a rewrite's name (a pattern's `transformation.rewrite`, equal to
the pattern id and to the codemod's file name) to its codemod class.
"""
from __future__ import annotations

import importlib
import pkgutil

from patterns.rewriter import codemods


def _discover() -> dict[str, type]:
    found = {}
    for mod in pkgutil.iter_modules(codemods.__path__):
        module = importlib.import_module(f"{codemods.__name__}.{mod.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and getattr(obj, "PATTERN", "") == mod.name:
                found[mod.name] = obj
    return found


REWRITES: dict[str, type] = _discover()
