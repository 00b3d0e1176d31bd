# run: matmul a=float32[70, 40] b=float32[40, 50]
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = tl.cdiv(M, BM) * num_pid_n
    o_k = tl.arange(0, BK)
    # a persistent grid: program p takes tiles p, p + NUM_SMS, p + 2 * NUM_SMS, ...
    for tile_id in range(tl.program_id(0), num_tiles, NUM_SMS):
        i_m, i_n = tile_id // num_pid_n, tile_id % num_pid_n
        o_m = i_m * BM + tl.arange(0, BM)
        o_n = i_n * BN + tl.arange(0, BN)
        b_acc = tl.zeros([BM, BN], dtype=tl.float32)
        for i_k in range(0, K, BK):
            b_a = tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :], mask=(o_m[:, None] < M) & ((i_k + o_k)[None, :] < K), other=0.0)
            b_b = tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :], mask=((i_k + o_k)[:, None] < K) & (o_n[None, :] < N), other=0.0)
            b_acc += tl.dot(b_a, b_b)
        tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc.to(c.dtype.element_ty), mask=(o_m[:, None] < M) & (o_n[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, device=a.device, dtype=a.dtype)
    # one resident program per SM; the interpreter gets a few to exercise the tile loop
    NUM_SMS = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4
    num_tiles = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    grid = (min(NUM_SMS, num_tiles),)
    matmul_kernel[grid](a, b, c, M, N, K, BM=128, BN=128, BK=64, NUM_SMS=NUM_SMS)
    return c
