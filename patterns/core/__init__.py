"""The core every stage builds on: types (facts_types, schema, records), kernel facts,
predicates, library loading, the op registry and the op and benchmark specs.

Nothing here imports a stage (distill, retriever, rewriter, validation, serving,
kernels) or an entry point (CLI, agent, benchmark); tests/test_layers.py enforces it.
"""
