"""Copy variable-length segments out of a packed buffer: y[b, :len_b] = x[start_b : start_b + len_b].

The packer pads every segment to a multiple of 16 elements. tl.multiple_of
tells the compiler so: the start loaded from memory is declared 16-aligned,
and the block of offsets after it contiguous, so loads vectorise.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def segment_copy_kernel(x, starts, lens, y, L_MAX, BLOCK: tl.constexpr):
    i_b, i_c = tl.program_id(0), tl.program_id(1)
    # the packer aligns every segment start to 16 elements (see segment_copy)
    start = tl.multiple_of(tl.load(starts + i_b), 16)
    length = tl.load(lens + i_b)
    o = tl.max_contiguous(tl.multiple_of(i_c * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)
    m = o < length
    tl.store(y + i_b * L_MAX + o, tl.load(x + start + o, mask=m, other=0.0), mask=o < L_MAX)


def segment_copy(x: torch.Tensor, starts: torch.Tensor, lens: torch.Tensor, L_MAX: int) -> torch.Tensor:
    B = starts.numel()
    y = torch.empty(B, L_MAX, device=x.device, dtype=x.dtype)
    segment_copy_kernel[(B, triton.cdiv(L_MAX, 64))](x, starts, lens, y, L_MAX, BLOCK=64)
    return y
