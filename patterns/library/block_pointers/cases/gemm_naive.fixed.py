# run: matmul a=float32[70, 40] b=float32[40, 50]
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    i_m, i_n = pid // num_pid_n, pid % num_pid_n
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    p_a = tl.make_block_ptr(a, (M, K), (K, 1), (i_m * BM, 0), (BM, BK), (1, 0))
    p_b = tl.make_block_ptr(b, (K, N), (N, 1), (0, i_n * BN), (BK, BN), (1, 0))
    for _ in range(0, K, BK):
        b_a = tl.load(p_a, boundary_check=(0, 1), padding_option="zero")
        b_b = tl.load(p_b, boundary_check=(0, 1), padding_option="zero")
        b_acc += tl.dot(b_a, b_b)
        p_a = tl.advance(p_a, (0, BK))
        p_b = tl.advance(p_b, (BK, 0))
    p_c = tl.make_block_ptr(c, (M, N), (N, 1), (i_m * BM, i_n * BN), (BM, BN), (1, 0))
    tl.store(p_c, b_acc.to(c.dtype.element_ty), boundary_check=(0, 1))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 128),)
    matmul_kernel[grid](a, b, c, M, N, K, BM=128, BN=128, BK=64)
    return c
