"""Layer-wise prefill whose KV cache a second thread of the same process ships to a KV store.

The prefill thread runs a request through the model one layer at a time: it
launches the layer (its keys and values go to the request's pages of the paged
KV pool), blocks in a native wait until the device has finished the layer, and
hands the layer to the transfer thread. The transfer thread copies the layer's
pages into the KV store in one bulk op and blocks in a native wait until the
NIC reports the send complete; layer l travels while layer l+1 computes.

Both waits are native calls through the `_native` handle. Loaded with
ctypes.PyDLL, its functions keep the GIL for the whole call: while one thread
waits, the other cannot run a line of Python, and the transfer's completion
wait lands on the prefill's critical path instead of hiding behind the next
layer's device time. Loaded with ctypes.CDLL, they release it for the call.

`native_wait` (serving/native/wait.c) stands for the two blocking waits (an
event synchronisation, a completion-queue poll): it sleeps for the durations in
`PrefillConfig`, a layer's device time and the wire time of its pages, and
stamps its own entry and exit, so the thread timeline shows exactly when each
wait ran. The layer's compute and the page copies are real and run on the
request's device. `patterns.serving.overlap` measures this file.
"""
from __future__ import annotations

import ctypes
import queue
import threading
import time
from dataclasses import dataclass

import torch

from patterns.serving import native
from patterns.serving.kvstore import KVStore
from patterns.serving.trace import Timeline

_native = ctypes.PyDLL(str(native.library("wait")))
_native.native_wait.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)]
_native.native_wait.restype = None
TRANSFER_THREAD = "kv-transfer"


@dataclass(frozen=True)
class PrefillConfig:
    layers: int = 32
    tokens: int = 64
    hidden: int = 64
    kv_heads: int = 2
    head_dim: int = 32
    page: int = 16
    # what the two native waits stand for; a layer's pages take 40% of its device time
    # on the wire, so a wait that holds the GIL costs about that much (see serving/README.md)
    device_us: int = 16000
    wire_us: int = 6400
    seed: int = 0


@dataclass
class Request:
    cfg: PrefillConfig
    hidden: torch.Tensor  # [T, D] the prompt's embeddings
    w_qkv: torch.Tensor  # [L, D, D + 2 * HK * Dh]
    w_o: torch.Tensor  # [L, D, D]
    pool: torch.Tensor  # [L, P, PAGE, 2, HK, Dh] the paged KV pool, shared with other requests
    page_ids: torch.Tensor  # [ceil(T / PAGE)] int64, the request's pages (scattered in the pool)
    slots: torch.Tensor  # [T] int64, token t's row in the pool's flattened pages


def make_request(cfg: PrefillConfig, device: str = "cpu") -> Request:
    T, D, HK, Dh, PAGE, L = cfg.tokens, cfg.hidden, cfg.kv_heads, cfg.head_dim, cfg.page, cfg.layers
    gen = torch.Generator().manual_seed(cfg.seed)
    n_pages = -(-T // PAGE)
    pool_pages = 2 * n_pages + 3
    page_ids = torch.randperm(pool_pages, generator=gen)[:n_pages]
    slots = (page_ids[:, None] * PAGE + torch.arange(PAGE)).flatten()[:T]
    tensors = dict(
        hidden=torch.randn(T, D, generator=gen),
        w_qkv=torch.randn(L, D, D + 2 * HK * Dh, generator=gen) / D**0.5,
        w_o=torch.randn(L, D, D, generator=gen) / (2 * D**0.5),
        pool=torch.zeros(L, pool_pages, PAGE, 2, HK, Dh),
        page_ids=page_ids,
        slots=slots,
    )
    return Request(cfg=cfg, **{k: v.to(device) for k, v in tensors.items()})


def make_store(req: Request) -> KVStore:
    _, _, *page_shape = req.pool.shape
    return KVStore(req.cfg.layers, len(req.page_ids), tuple(page_shape), req.pool.dtype, pin=req.pool.is_cuda)


def _wait(us: int, timeline: Timeline, name: str, **args) -> None:
    stamps = (ctypes.c_int64 * 2)()
    _native.native_wait(us, stamps)
    timeline.add(name, stamps[0], stamps[1], native=True, **args)


def wait_for_device(us: int, timeline: Timeline, i_l: int) -> None:
    """Block until the device has finished layer `i_l` (an event synchronisation)."""
    _wait(us, timeline, f"device wait L{i_l}", layer=i_l)


def wait_for_completion(us: int, timeline: Timeline, i_l: int) -> None:
    """Block until the NIC reports layer `i_l`'s pages sent (a completion-queue poll)."""
    _wait(us, timeline, f"completion wait L{i_l}", layer=i_l)


def prefill_layer(req: Request, i_l: int, h: torch.Tensor) -> torch.Tensor:
    """One layer: its keys and values into the request's pages, the hidden state through a projection."""
    cfg = req.cfg
    kv_width = 2 * cfg.kv_heads * cfg.head_dim
    x, kv = torch.mm(h, req.w_qkv[i_l]).split([cfg.hidden, kv_width], dim=-1)
    req.pool[i_l].view(-1, kv_width).index_copy_(0, req.slots, kv)  # row = page * PAGE + offset
    return torch.addmm(h, torch.tanh(x), req.w_o[i_l])


def _transfer(req: Request, store: KVStore, ready: queue.Queue, timeline: Timeline) -> None:
    while (item := ready.get()) is not None:
        i_l, handed_ns = item
        # from the hand-off to here the thread was runnable: waiting for the GIL
        timeline.add(f"queued L{i_l}", handed_ns, time.perf_counter_ns(), layer=i_l)
        with timeline.span(f"send L{i_l}", layer=i_l):
            store.write_layer(i_l, req.pool[i_l], req.page_ids)
        wait_for_completion(req.cfg.wire_us, timeline, i_l)
        store.complete(i_l)


def prefill(req: Request, store: KVStore | None = None, timeline: Timeline | None = None) -> torch.Tensor:
    """Prefill `req`; with a `store`, ship each finished layer's pages to it from a second thread.

    Returns the last hidden state once every layer has landed in the store.
    """
    timeline = timeline if timeline is not None else Timeline()
    sender = None
    if store is not None:
        ready: queue.Queue = queue.Queue()
        sender = threading.Thread(target=_transfer, args=(req, store, ready, timeline), name=TRANSFER_THREAD)
        sender.start()
    h = req.hidden
    try:
        for i_l in range(req.cfg.layers):
            with timeline.span(f"layer L{i_l}", layer=i_l):
                h = prefill_layer(req, i_l, h)
            wait_for_device(req.cfg.device_us, timeline, i_l)
            if sender is not None:
                ready.put((i_l, time.perf_counter_ns()))
    finally:
        if sender is not None:
            ready.put(None)
            sender.join()
    return h
