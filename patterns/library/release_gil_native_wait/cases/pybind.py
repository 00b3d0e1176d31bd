# refuse: no ctypes.PyDLL .*: a pybind11 or C-extension binding releases the GIL in C\+\+
"""KV transfer through a pybind11 extension: the wait is a C++ binding, not a ctypes call."""
import torch
from sgl_kernel import kvcacheio


def wait_for_layer(event: int) -> None:
    kvcacheio.wait_event(event)  # m.def("wait_event", &wait_event) holds the GIL unless the binding releases it


def send_layer(kv: torch.Tensor, event: int) -> None:
    wait_for_layer(event)
    kvcacheio.transfer(kv)
