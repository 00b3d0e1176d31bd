"""Decode-time linear layer y = x @ w^T (w stored [N, K]) for a few tokens M, swap-AB.

For small M the kernel computes y^T = w @ x^T: the BN-wide weight tile becomes
the dot's M side (a multiple of 64, so Hopper's wgmma applies) and the 16-token
tile its N side (any multiple of 8). The accumulator is transposed once before
the store.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def linear_kernel(
    x, w, y, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SWAP_AB: tl.constexpr,
):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    if SWAP_AB:
        # [BN, BM]
        b_acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        # [BM, BN]
        b_acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        m_k = (k + o_k) < K
        # [BM, BK]
        b_x = tl.load(x + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BN, BK]
        b_w = tl.load(w + o_n[:, None] * K + (k + o_k)[None, :], mask=m_n[:, None] & m_k[None, :], other=0.0)
        if SWAP_AB:
            # [BN, BK] @ [BK, BM] -> [BN, BM]
            b_acc = tl.dot(b_w, tl.trans(b_x), b_acc)
        else:
            b_acc = tl.dot(b_x, tl.trans(b_w), b_acc)
    if SWAP_AB:
        b_y = tl.trans(b_acc)
    else:
        b_y = b_acc
    tl.store(y + o_m[:, None] * N + o_n[None, :], b_y.to(y.dtype.element_ty), mask=m_m[:, None] & m_n[None, :])


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    y = torch.empty(M, N, device=x.device, dtype=x.dtype)
    BM, BN, BK = max(16, min(64, triton.next_power_of_2(M))), 64, 32
    # wgmma needs the dot's M to be a multiple of 64: swap when the token tile is smaller
    # and the weight tile is not (SM90+; the interpreter takes the swapped path too)
    sm90 = not x.is_cuda or torch.cuda.get_device_capability(x.device)[0] >= 9
    swap_ab = sm90 and BM < 64 and BN >= 64
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    linear_kernel[grid](x, w, y, M, N, K, BM=BM, BN=BN, BK=BK, SWAP_AB=swap_ab, num_warps=4)
    return y
