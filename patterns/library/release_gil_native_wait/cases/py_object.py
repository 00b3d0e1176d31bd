# refuse: line 6: ctypes.py_object: a function that takes or returns Python objects needs the GIL
"""Host bookkeeping in a C extension loaded with ctypes.PyDLL: it builds Python objects."""
import ctypes

_stats = ctypes.PyDLL("libkvstats.so")
_stats.collect_stats.restype = ctypes.py_object  # returns a dict built with the C API
_stats.wait_for_transfer.argtypes = [ctypes.c_int]


def wait_and_collect(layer: int) -> dict:
    _stats.wait_for_transfer(layer)
    return _stats.collect_stats()
