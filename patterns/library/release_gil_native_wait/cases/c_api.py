# refuse: line 7: _api.PyThreadState_SetAsyncExc is a Python C API function: it needs the GIL
"""A watchdog that stops a stuck transfer thread through the Python C API."""
import ctypes
import threading

_api = ctypes.PyDLL(None)
_api.PyThreadState_SetAsyncExc.argtypes = [ctypes.c_ulong, ctypes.c_void_p]


def interrupt(thread: threading.Thread) -> None:
    _api.PyThreadState_SetAsyncExc(thread.ident, id(TimeoutError))
