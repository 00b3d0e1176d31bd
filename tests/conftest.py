"""Test setup: kernels run on the CPU through Triton's interpreter unless a GPU is present."""
import os

from patterns.core import interpreter

interpreter.enable()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
