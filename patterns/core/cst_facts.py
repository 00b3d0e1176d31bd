"""libcst helpers for the rewriter's codemods (facts themselves come from patterns.core.facts)."""
from __future__ import annotations

import libcst as cst


def dotted(node: cst.BaseExpression | None) -> str:
    """`a.b.c` for Name/Attribute chains, '' for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""
