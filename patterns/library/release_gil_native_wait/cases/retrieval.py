# tests/retrieval_set/host_pydll_wait.py
"""Prefill step that waits on a native completion flag through ctypes.PyDLL while a transfer thread runs."""
import ctypes
import threading

import torch

_native = ctypes.PyDLL(None)


def wait_for_device(us: int) -> None:
    # stand-in for a driver/NIC completion poll implemented in C
    _native.usleep(us)


def prefill_with_transfer(layers: list[torch.Tensor], store: list[torch.Tensor]) -> None:
    def transfer():
        for kv in layers:
            store.append(kv.clone())

    t = threading.Thread(target=transfer)
    t.start()
    for _ in layers:
        wait_for_device(2000)
    t.join()
