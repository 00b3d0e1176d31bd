# a wrapper class over an RDMA completion library, imported by name and through ctypes.pydll
import ctypes as ct
from ctypes import CDLL, c_int, c_void_p


class CompletionQueue:
    """Polls a NIC completion queue; the poll blocks until the layer's pages are sent."""

    def __init__(self, path: str):
        self._lib = CDLL(path)
        self._lib.cq_wait.argtypes = [c_void_p, c_int]
        self._lib.cq_wait.restype = c_int
        self._sync = ct.cdll.LoadLibrary("libcudart.so")

    def wait(self, cq: int, n: int) -> int:
        self._sync.cudaDeviceSynchronize()
        return self._lib.cq_wait(cq, n)
