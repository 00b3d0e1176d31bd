"""bf16 GEMM C = A @ B^T (both K-major, as DeepGEMM's NT layout) with fp32 accumulation.

The K loop is warp-specialized: the compiler splits it into a producer
partition (a few warps that only issue TMA loads into a NUM_STAGES ring of
shared-memory buffers) and consumer warpgroups that only wait on the ring's
barriers and run wgmma; setmaxnreg hands the producer's registers to the consumers.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def gemm_nt_fwd_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_STAGES: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m = i_m.to(tl.int64) * BM + tl.arange(0, BM)
    o_n = i_n.to(tl.int64) * BN + tl.arange(0, BN)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in tl.range(0, tl.cdiv(K, BK), num_stages=NUM_STAGES, warp_specialize=True):
        # [BM, BK], [BN, BK]
        b_a = a_desc.load([i_m * BM, i_k * BK])
        b_b = b_desc.load([i_n * BN, i_k * BK])
        b_c = tl.dot(b_a, b_b.T, b_c)
    m_c = (o_m[:, None] < M) & (o_n[None, :] < N)
    tl.store(c_ptr + o_m[:, None] * N + o_n[None, :], b_c, mask=m_c)


def gemm_nt(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N, _ = b.shape
    c = torch.empty(M, N, dtype=torch.float32, device=a.device)
    BM, BN, BK = 128, 128, 64
    # device-side TMA descriptors are built in a scratch buffer from this allocator
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=a.device))
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    gemm_nt_fwd_kernel[grid](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, NUM_STAGES=3, num_warps=4)
    return c
