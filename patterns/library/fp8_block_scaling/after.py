"""FP8 (e4m3) linear layer, out = x @ wᵀ, with per-block scales.

Activations get one scale per token and group of G = 128 channels (1×128), computed
in the same pass that casts them; weights one scale per 128×128 block. The GEMM's
K tile is one group: each tile's fp8 product is scaled by a_s[m, k]·b_s[n, k] and
added to an fp32 accumulator, which also promotes the partial sums out of the
tensor core's fp8 accumulator every 128 elements of K.
"""
import torch
import triton
import triton.language as tl

FP8_MAX = 448.0


@triton.jit
def fp8_group_quant_kernel(x, y, s, K, NK, G: tl.constexpr):
    i_m, i_g = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_k = i_g * G + tl.arange(0, G)
    m_k = o_k < K
    # [G]
    b_x = tl.load(x + i_m * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_s = tl.maximum(tl.max(tl.abs(b_x), 0), 1e-10) / 448.0
    b_y = tl.clamp(b_x / b_s, -448.0, 448.0)
    tl.store(y + i_m * K + o_k, b_y.to(y.dtype.element_ty), mask=m_k)
    tl.store(s + i_m * NK + i_g, b_s)


@triton.jit
def fp8_gemm_kernel(a, b, c, a_s, b_s, M, N, K, NK, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_m = i_m * BM + tl.arange(0, BM)
    o_n = i_n * BN + tl.arange(0, BN)
    m_m, m_n = o_m < M, o_n < N
    # [BM, BN]
    b_c = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        # [BM, BK] and [BK, BN], fp8
        b_a = tl.load(a + o_m[:, None] * K + o_k[None, :], mask=m_m[:, None] & m_k[None, :], other=0.0)
        b_b = tl.load(b + o_n[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_n[None, :], other=0.0)
        # [BM] per-token scales and [BN] per-block weight scales of this K group
        b_as = tl.load(a_s + o_m * NK + i_k, mask=m_m, other=0.0)
        b_bs = tl.load(b_s + (o_n // BK) * NK + i_k, mask=m_n, other=0.0)
        b_c += tl.dot(b_a, b_b) * b_as[:, None] * b_bs[None, :]
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_c, mask=m_m[:, None] & m_n[None, :])


def quant_weight(w: torch.Tensor, G: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Offline: one scale per G×G block of the weight."""
    N, K = w.shape
    NN, NK = triton.cdiv(N, G), triton.cdiv(K, G)
    w_p = torch.nn.functional.pad(w.float(), (0, NK * G - K, 0, NN * G - N)).view(NN, G, NK, G)
    s = (w_p.abs().amax(dim=(1, 3), keepdim=True) / FP8_MAX).clamp(min=1e-10)
    w_q = (w_p / s).clamp(-FP8_MAX, FP8_MAX).view(NN * G, NK * G)[:N, :K]
    return w_q.contiguous().to(torch.float8_e4m3fn), s.reshape(NN, NK).contiguous()


def fp8_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    G = 128
    NK = triton.cdiv(K, G)
    w_q, w_s = quant_weight(w, G)
    x_q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=x.device)
    x_s = torch.empty(M, NK, dtype=torch.float32, device=x.device)
    fp8_group_quant_kernel[(M, NK)](x, x_q, x_s, K, NK, G=G)
    out = torch.empty(M, N, dtype=torch.float32, device=x.device)
    BM, BN = 16, 32
    fp8_gemm_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](x_q, w_q, out, x_s, w_s, M, N, K, NK, BM=BM, BN=BN, BK=G)
    return out
