"""Test setup: kernels run on the CPU through Triton's interpreter unless a GPU is present."""
import os
import sys

# `python -m pytest` puts the working directory first on sys.path. From the repository
# root that makes the top-level folders (kernels/, serving/, validation/) importable as
# top-level modules, which shadows PyPI's `kernels` (transformers imports it) and hides
# imports that only work from a checkout. The package is installed (editable), so the
# tests see exactly what a user's environment sees.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

from patterns.core import interpreter  # noqa: E402

interpreter.enable()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
