"""MXFP8 GEMM, out = dequant(a) @ dequant(b)ᵀ: e4m3 elements with one E8M0 (power-of-two) scale per 32 along K.

a is [M, K] e4m3 with a_s [M, K/32] uint8 exponents (scale 2^(a_s - 127)), b
likewise [N, K] with b_s [N, K/32]. The K loop loads the fp8 tiles and their
scales, expands each scale over its 32 elements, multiplies in fp32 and runs
an fp32 tl.dot: the tensor cores never see the 8-bit operands.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def mxfp8_gemm_kernel(a, a_s, b, b_s, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_s = tl.arange(0, BK // 32)
    m_m, m_n = o_m < M, o_n < N
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        o_k = i_k + tl.arange(0, BK)
        # [BM, BK] and [BN, BK] e4m3, [BM, BK/32] and [BN, BK/32] exponents
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None], other=0.0)
        b_b = tl.load(b + o_n[:, None] * K + o_k[None, :], mask=m_n[:, None], other=0.0)
        b_as = tl.load(a_s + o_m[:, None] * (K // 32) + i_k // 32 + o_s[None, :], mask=m_m[:, None], other=0)
        b_bs = tl.load(b_s + o_n[:, None] * (K // 32) + i_k // 32 + o_s[None, :], mask=m_n[:, None], other=0)
        # 2^(e - 127) broadcast over each group of 32
        b_sa = tl.reshape(tl.broadcast_to(tl.exp2(b_as.to(tl.float32) - 127.0)[:, :, None], [BM, BK // 32, 32]), [BM, BK])
        b_sb = tl.reshape(tl.broadcast_to(tl.exp2(b_bs.to(tl.float32) - 127.0)[:, :, None], [BN, BK // 32, 32]), [BN, BK])
        b_c += tl.dot(b_a.to(tl.float32) * b_sa, tl.trans(b_b.to(tl.float32) * b_sb))
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def mxfp8_gemm(a: torch.Tensor, a_s: torch.Tensor, b: torch.Tensor, b_s: torch.Tensor) -> torch.Tensor:
    a, b = a.view(torch.float8_e4m3fn), b.view(torch.float8_e4m3fn)  # e4m3 bits passed as uint8
    M, K = a.shape
    N = b.shape[0]
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    mxfp8_gemm_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, a_s, b, b_s, c, M, N, K, BM=16, BN=16, BK=64)
    return c
