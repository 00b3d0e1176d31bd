# a decode that covers V whole with tl.arange(0, V): the split adds the BV constexpr
import torch
import triton
import triton.language as tl


@triton.jit
def linear_attn_decode_kernel(q, k, v, h, o, scale, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                              BV: tl.constexpr):
    i_n, i_hv, i_v = tl.program_id(0).to(tl.int64) // tl.cdiv(V, BV), tl.program_id(1).to(tl.int64), tl.program_id(0).to(tl.int64) % tl.cdiv(V, BV)
    i_nh = i_n * HV + i_hv
    o_k = tl.arange(0, K)
    o_v = i_v * BV + tl.arange(0, BV)
    b_q = tl.load(q + i_nh * K + o_k).to(tl.float32) * scale
    b_k = tl.load(k + i_nh * K + o_k).to(tl.float32)
    p_h = h + i_nh * K * V + o_k[:, None] * V + o_v[None, :]
    # [K, V]
    b_h = tl.load(p_h) + b_k[:, None] * tl.load(v + i_nh * V + o_v).to(tl.float32)[None, :]
    tl.store(p_h, b_h)
    tl.store(o + i_nh * V + o_v, tl.sum(b_h * b_q[:, None], 0).to(o.dtype.element_ty))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this tiling targets; the interpreter has no SMs


def linear_attn_decode(q, k, v, h):
    N, HV, K = q.shape
    V = v.shape[-1]
    o = torch.empty_like(v)
    BV = triton.next_power_of_2(V)
    # at most 64 columns a program, then halve the V tile until the N*HV*NV programs
    # give every SM 4 (16 columns at least)
    BV = min(BV, 64)
    while BV > 16 and N * HV * triton.cdiv(V, BV) < 4 * _num_sms(q.device):
        BV //= 2
    linear_attn_decode_kernel[(N * triton.cdiv(V, BV), HV)](q, k, v, h, o, K**-0.5, HV=HV, K=K, V=V, BV=BV, num_warps=1 if BV <= 16 else 8)
    return o
