"""Layer-wise prefill with the KV cache sent to the decode side by a second thread.

Each layer's kernel writes its K rows into the paged KV pool; the main thread
then blocks in a native wait until the layer is done and hands the layer to the
transfer thread, which copies its pages into the send buffer. The native call
comes from a ctypes.PyDLL handle, which keeps the GIL for the whole wait, so
the transfer thread cannot run while the main thread waits.
"""
import ctypes
import queue
import threading

import torch
import triton
import triton.language as tl

# libc's usleep stands in for the blocking native wait (an event sync, an RDMA completion poll)
_native = ctypes.CDLL(None)
WAIT_US = 2000


@triton.jit
def prefill_layer_fwd_kernel(h_ptr, w_ptr, o_ptr, kv_ptr, slot_ptr, T, D, BT: tl.constexpr, BD: tl.constexpr):
    i_t = tl.program_id(0).to(tl.int64)
    o_t = i_t * BT + tl.arange(0, BT)
    o_d = tl.arange(0, BD)
    m_t, m_d = o_t < T, o_d < D
    m_td = m_t[:, None] & m_d[None, :]
    # [BT, BD]
    b_h = tl.load(h_ptr + o_t[:, None] * D + o_d[None, :], mask=m_td, other=0.0)
    # [BD, BD]
    b_w = tl.load(w_ptr + o_d[:, None] * D + o_d[None, :], mask=m_d[:, None] & m_d[None, :], other=0.0)
    b_o = b_h + tl.dot(b_h, b_w, input_precision="ieee")
    tl.store(o_ptr + o_t[:, None] * D + o_d[None, :], b_o, mask=m_td)
    # the layer's K rows go to their slots in the paged pool
    b_slot = tl.load(slot_ptr + o_t, mask=m_t, other=0).to(tl.int64)
    tl.store(kv_ptr + b_slot[:, None] * D + o_d[None, :], b_o, mask=m_td)


def _transfer_worker(kv_cache: torch.Tensor, page_ids: list, sent: torch.Tensor, ready: queue.Queue) -> None:
    while (i_l := ready.get()) is not None:
        for i_p, page in enumerate(page_ids):
            sent[i_l, i_p].copy_(kv_cache[i_l, page])


def prefill_with_kv_transfer(h: torch.Tensor, w: torch.Tensor, kv_cache: torch.Tensor, page_ids: torch.Tensor):
    T, D = h.shape
    L, _, PAGE, _ = kv_cache.shape
    pages = page_ids.tolist()
    slots = (page_ids[:, None] * PAGE + torch.arange(PAGE, device=h.device)).flatten()[:T].contiguous()
    sent = torch.empty(L, len(pages), PAGE, D, dtype=kv_cache.dtype, device=kv_cache.device)
    ready = queue.Queue()
    sender = threading.Thread(target=_transfer_worker, args=(kv_cache, pages, sent, ready))
    sender.start()
    BT, BD = 16, max(16, triton.next_power_of_2(D))
    for i_l in range(L):
        out = torch.empty_like(h)
        prefill_layer_fwd_kernel[(triton.cdiv(T, BT),)](h, w[i_l], out, kv_cache[i_l], slots, T, D, BT=BT, BD=BD)
        _native.usleep(WAIT_US)
        ready.put(i_l)
        h = out
    ready.put(None)
    sender.join()
    return h, sent
