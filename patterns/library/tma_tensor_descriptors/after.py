"""Linear layer y = x @ w^T (w stored [N, K] as in nn.Linear) through TMA tensor descriptors.

Each operand is described once (shape, strides, block shape); a load is one
descriptor and a tile coordinate. On Hopper and later the copy engine (TMA)
moves the tile into shared memory and clips it at the tensor's edges, so the
kernel computes no per-element addresses or masks.
"""
import torch
import triton
import triton.language as tl

_ALLOCATOR_SET = False


def _set_allocator():
    # device-side descriptors live in a small global scratch buffer; set it once per process
    global _ALLOCATOR_SET
    if not _ALLOCATOR_SET:
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
        _ALLOCATOR_SET = True


@triton.jit
def linear_kernel(x, w, y, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    w_desc = tl.make_tensor_descriptor(w, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    y_desc = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    # [BM, BN]
    b_y = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        # [BM, BK], rows past M and columns past K arrive as zeros
        b_x = x_desc.load([i_m * BM, k])
        # [BN, BK]
        b_w = w_desc.load([i_n * BN, k])
        b_y = tl.dot(b_x, tl.trans(b_w), b_y)
    y_desc.store([i_m * BM, i_n * BN], b_y.to(y.dtype.element_ty))


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    # TMA: the base is 16-byte aligned and every stride but the last is a multiple of 16 bytes
    assert x.is_contiguous() and w.is_contiguous() and (K * x.element_size()) % 16 == 0 and (N * x.element_size()) % 16 == 0
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    if x.is_cuda:
        _set_allocator()
    BM, BN, BK = 32, 32, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    linear_kernel[grid](x, w, y, M, N, K, BM=BM, BN=BN, BK=BK)
    return y
