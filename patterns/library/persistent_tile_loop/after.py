"""Tiled GEMM c = a @ b, one program per output tile (grouped order).

The grid has one program per tile: every tile pays its own launch slot, index
set-up and pipeline fill, and its epilogue (convert + store) runs while that
SM's tensor cores wait for the next program.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a, b, c, M, N, K,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    num_tiles = num_pid_m * num_pid_n
    o_k = tl.arange(0, BLOCK_SIZE_K)
    # a persistent grid: program p takes tiles p, p + NUM_SMS, p + 2 * NUM_SMS, ...
    for tile_id in range(tl.program_id(0), num_tiles, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        # the last group is short when num_pid_m is not a multiple of GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m

        o_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        o_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        m_m, m_n = o_m < M, o_n < N
        # [BM, BN]
        b_acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_SIZE_K):
            m_k = (k + o_k) < K
            # [BM, BK]
            b_a = tl.load(a + o_m[:, None] * K + (k + o_k)[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
            # [BK, BN]
            b_b = tl.load(b + (k + o_k)[:, None] * N + o_n[None, :], mask=m_k[:, None] & m_n[None, :], other=0.0)
            b_acc = tl.dot(b_a, b_b, b_acc)
        tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc.to(c.dtype.element_ty), mask=m_m[:, None] & m_n[None, :])


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    BM, BN, BK = 16, 32, 32
    # one resident program per SM; the interpreter gets a few to exercise the tile loop
    NUM_SMS = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    num_tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    grid = (min(NUM_SMS, num_tiles),)
    matmul_kernel[grid](
        a, b, c, M, N, K, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=4, NUM_SMS=NUM_SMS,
    )
    return c
