"""Copy variable-length segments out of a packed buffer: y[b, :len_b] = x[start_b : start_b + len_b].

The packer pads every segment to a multiple of 16 elements, so every start is
16-aligned, but the kernel loads the starts from memory and the compiler can
prove nothing about them: each lane's access is treated as unaligned and
loads go out one element at a time.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def segment_copy_kernel(x, starts, lens, y, L_MAX, BLOCK: tl.constexpr):
    i_b, i_c = tl.program_id(0), tl.program_id(1)
    start = tl.load(starts + i_b)
    length = tl.load(lens + i_b)
    o = i_c * BLOCK + tl.arange(0, BLOCK)
    m = o < length
    tl.store(y + i_b * L_MAX + o, tl.load(x + start + o, mask=m, other=0.0), mask=o < L_MAX)


def segment_copy(x: torch.Tensor, starts: torch.Tensor, lens: torch.Tensor, L_MAX: int) -> torch.Tensor:
    B = starts.numel()
    y = torch.empty(B, L_MAX, device=x.device, dtype=x.dtype)
    segment_copy_kernel[(B, triton.cdiv(L_MAX, 64))](x, starts, lens, y, L_MAX, BLOCK=64)
    return y
