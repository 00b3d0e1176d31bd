"""Kernel facts: what a Python file's Triton kernels and launchers do, with lines.

One package serves every stage: the library's `present_when` checks, the
distiller, the retriever and the rewriter. Facts are deliberately generic
(every call site with its arguments, loops, launches) so that predicates are
queries over them rather than one-off AST walks.

    constants  names the extractors and their readers agree on (aliases, FOLDED_AXIS)
    kernel     the extractor: one stdlib parse and walk per file
    host       the lighter reader of host functions (used where host code is most of the file)
    cache      facts by content hash, in the user cache
"""
from patterns.core.facts.cache import extract_file, extract_source, extractor_digest, write_atomic
from patterns.core.facts.constants import FLOAT_DTYPES, FOLDED_AXIS, JIT_DECORATORS, MODULE_ALIASES, FactsError

__all__ = [
    "FLOAT_DTYPES", "FOLDED_AXIS", "JIT_DECORATORS", "MODULE_ALIASES", "FactsError",
    "extract_file", "extract_source", "extractor_digest", "write_atomic",
]
