"""Gather a request's KV pages from every layer's pool into one staging buffer (PD-disaggregation send path).

One launch per layer: the host loop issues L launches of a grid of
n_pages x blocks programs, each moving a few KiB, so for small requests the
step costs L launch latencies rather than the bytes it moves.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def kv_gather_fwd_kernel(kv_ptr, page_ptr, st_ptr, PAGE_ELEMS, BLOCK: tl.constexpr):
    i_p, i_e = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    page = tl.load(page_ptr + i_p).to(tl.int64)
    o_e = i_e * BLOCK + tl.arange(0, BLOCK)
    m_e = o_e < PAGE_ELEMS
    # [BLOCK]
    b_kv = tl.load(kv_ptr + page * PAGE_ELEMS + o_e, mask=m_e)
    tl.store(st_ptr + i_p * PAGE_ELEMS + o_e, b_kv, mask=m_e)


def gather_kv_to_staging(kv_cache: torch.Tensor, page_ids: torch.Tensor) -> torch.Tensor:
    L, _, PAGE, D = kv_cache.shape
    n_pages = page_ids.shape[0]
    staging = torch.empty(L, n_pages, PAGE, D, dtype=kv_cache.dtype, device=kv_cache.device)
    BLOCK = 256
    grid = (n_pages, triton.cdiv(PAGE * D, BLOCK))
    for i_l in range(L):
        kv_gather_fwd_kernel[grid](kv_cache[i_l], page_ids, staging[i_l], PAGE * D, BLOCK=BLOCK)
    return staging
