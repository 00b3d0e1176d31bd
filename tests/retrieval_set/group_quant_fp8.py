"""Per-token-group FP8 quantization (1x128 groups), SGLang style: one program per group computes its scale from its own absmax."""
import torch
import triton
import triton.language as tl


@triton.jit
def per_token_group_quant_kernel(y_ptr, y_q_ptr, y_s_ptr, group_size, eps, fp8_min, fp8_max, BLOCK: tl.constexpr):
    g_id = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < group_size
    y = tl.load(y_ptr + g_id * group_size + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(y)), eps)
    y_s = absmax / fp8_max
    y_q = tl.clamp(y / y_s, fp8_min, fp8_max).to(y_q_ptr.dtype.element_ty)
    tl.store(y_q_ptr + g_id * group_size + cols, y_q, mask=mask)
    tl.store(y_s_ptr + g_id, y_s)


def per_token_group_quant(x: torch.Tensor, group_size: int = 128, dtype=torch.float8_e4m3fn):
    M, N = x.shape
    info = torch.finfo(dtype)
    x_q = torch.empty(M, N, dtype=dtype, device=x.device)
    x_s = torch.empty(M, N // group_size, dtype=torch.float32, device=x.device)
    per_token_group_quant_kernel[(M * N // group_size,)](x, x_q, x_s, group_size, 1e-10, info.min, info.max,
                                                         BLOCK=triton.next_power_of_2(group_size))
    return x_q, x_s
