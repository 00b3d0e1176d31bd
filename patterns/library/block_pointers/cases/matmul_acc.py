# run: matmul_acc_ c=float32[40, 50] a=float32[40, 30] b=float32[30, 50]
# autotune_configs_keys/before.py: c += a @ b through a named pointer p_c that is loaded and stored
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_acc_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    o_k = tl.arange(0, BK)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        m_k = (k + o_k) < K
        # [BM, BK]
        b_a = tl.load(a + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        # [BK, BN]
        b_b = tl.load(b + (k + o_k)[:, None] * N + o_n[None, :], mask=m_k[:, None] & m_n[None, :], other=0.0)
        b_acc = tl.dot(b_a, b_b, b_acc)
    p_c = c + o_m[:, None] * N + o_n[None, :]
    m_c = m_m[:, None] & m_n[None, :]
    b_c = tl.load(p_c, mask=m_c, other=0.0).to(tl.float32) + b_acc
    tl.store(p_c, b_c.to(c.dtype.element_ty), mask=m_c)


def matmul_acc_(c, a, b):
    M, K = a.shape
    N = b.shape[1]
    matmul_acc_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BM=32, BN=32, BK=32)
    return c
