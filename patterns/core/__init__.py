"""The core every stage builds on: types, kernel facts, predicates, library loading, op specs.

Nothing here imports a stage (distill, retriever, rewriter, validation, serving,
kernels) or an entry point (CLI, agent); tests/test_layers.py enforces it.
"""
