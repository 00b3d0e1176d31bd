# run: matmul_acc_ c=float32[40, 50] a=float32[40, 30] b=float32[30, 50]
# autotune_configs_keys/before.py: c += a @ b through a named pointer p_c that is loaded and stored
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_acc_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    # [BM, BN]
    b_acc = tl.zeros((BM, BN), dtype=tl.float32)
    p_a = tl.make_block_ptr(a, (M, K), (K, 1), (i_m * BM, 0), (BM, BK), (1, 0))
    p_b = tl.make_block_ptr(b, (K, N), (N, 1), (0, i_n * BN), (BK, BN), (1, 0))
    for _ in range(0, K, BK):
        # [BM, BK]
        b_a = tl.load(p_a, boundary_check=(0, 1), padding_option="zero")
        # [BK, BN]
        b_b = tl.load(p_b, boundary_check=(0, 1), padding_option="zero")
        b_acc = tl.dot(b_a, b_b, b_acc)
        p_a = tl.advance(p_a, (0, BK))
        p_b = tl.advance(p_b, (BK, 0))
    p_c = tl.make_block_ptr(c, (M, N), (N, 1), (i_m * BM, i_n * BN), (BM, BN), (1, 0))
    b_c = tl.load(p_c, boundary_check=(0, 1), padding_option="zero").to(tl.float32) + b_acc
    tl.store(p_c, b_c.to(c.dtype.element_ty), boundary_check=(0, 1))


def matmul_acc_(c, a, b):
    M, K = a.shape
    N = b.shape[1]
    matmul_acc_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BM=32, BN=32, BK=32)
    return c
