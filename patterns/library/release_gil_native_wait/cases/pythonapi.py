# refuse: line 11: ctypes.pythonapi calls the Python C API
import ctypes
import time

_native = ctypes.PyDLL(None)


def wait_then_yield(us: int) -> None:
    _native.usleep(us)
    # hand the GIL to other threads explicitly after the wait
    ctypes.pythonapi.PyEval_SaveThread()
