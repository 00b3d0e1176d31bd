# run: matmul a=float32[70, 40] b=float32[40, 50]
# tests/retrieval_set/persistent_gemm.py: a persistent loop over tiles (tile id decomposed per step), an inner K loop
import torch
import triton
import triton.language as tl


@triton.jit
def persistent_matmul_kernel(a, b, c, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    start = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    o_k = tl.arange(0, BK)
    for tile in range(start, num_tiles, NUM_SMS):
        i_m, i_n = tile // num_pid_n, tile % num_pid_n
        o_m = i_m * BM + tl.arange(0, BM)
        o_n = i_n * BN + tl.arange(0, BN)
        b_acc = tl.zeros([BM, BN], dtype=tl.float32)
        for i_k in tl.range(0, K, BK, num_stages=3):
            b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
            b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
            b_acc += tl.dot(b_a, b_b)
        tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc.to(c.dtype.element_ty), mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    tiles = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    persistent_matmul_kernel[(min(num_sms, tiles),)](a, b, c, M, N, K, NUM_SMS=num_sms, BM=128, BN=128, BK=64)
    return c
