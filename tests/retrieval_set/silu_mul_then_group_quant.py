"""SwiGLU activation then per-token-group int8 quantization for the down projection, as two kernels with h in memory between them."""
import torch
import triton
import triton.language as tl


@triton.jit
def act_and_mul_kernel(gate_up, h, d, BLOCK: tl.constexpr):
    tok, blk = tl.program_id(0).to(tl.int64), tl.program_id(1)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    mask = offs < d
    gate = tl.load(gate_up + tok * 2 * d + offs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up + tok * 2 * d + d + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(h + tok * d + offs, gate * tl.sigmoid(gate) * up, mask=mask)


@triton.jit
def quant_group_kernel(h, q, scales, d, n_groups, GROUP: tl.constexpr):
    tok, grp = tl.program_id(0).to(tl.int64), tl.program_id(1)
    offs = grp * GROUP + tl.arange(0, GROUP)
    mask = offs < d
    x = tl.load(h + tok * d + offs, mask=mask, other=0.0)
    scale = tl.maximum(tl.max(tl.abs(x), 0), 1e-10) / 127.0
    v = tl.clamp(x / scale, -127.0, 127.0)
    tl.store(q + tok * d + offs, tl.where(v >= 0, v + 0.5, v - 0.5).to(tl.int8), mask=mask)
    tl.store(scales + tok * n_groups + grp, scale)


def swiglu_quant(gate_up: torch.Tensor, group: int = 128):
    M, d = gate_up.shape[0], gate_up.shape[1] // 2
    n_groups = triton.cdiv(d, group)
    h = torch.empty(M, d, dtype=torch.float32, device=gate_up.device)
    act_and_mul_kernel[(M, n_groups)](gate_up, h, d, BLOCK=group)
    q = torch.empty(M, d, dtype=torch.int8, device=gate_up.device)
    scales = torch.empty(M, n_groups, dtype=torch.float32, device=gate_up.device)
    quant_group_kernel[(M, n_groups)](h, q, scales, d, n_groups, GROUP=group)
    return q, scales
