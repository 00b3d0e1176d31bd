"""cu_seqlens from per-sequence lengths: an exclusive prefix sum, one program
walking the batch one sequence at a time."""
import torch
import triton
import triton.language as tl


@triton.jit
def seq_offsets_kernel(lens, cu_seqlens, B):
    total = tl.zeros([], dtype=tl.int32)
    tl.store(cu_seqlens, total)
    for i in range(B):
        total += tl.load(lens + i)
        tl.store(cu_seqlens + i + 1, total)


def seq_offsets(lens: torch.Tensor) -> torch.Tensor:
    B = lens.numel()
    cu = torch.empty(B + 1, device=lens.device, dtype=torch.int32)
    seq_offsets_kernel[(1,)](lens, cu, B)
    return cu
