import torch
import triton
import triton.language as tl


@triton.jit
def decode_fwd_kernel(q, k, v, o_part, lse_part, scale, T, H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr,
                      NUM_SPLITS: tl.constexpr):
    i_b, i_h, i_s = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    o_d = tl.arange(0, D)
    split_len = tl.cdiv(tl.cdiv(T, NUM_SPLITS), BT) * BT
    start = i_s * split_len
    end = tl.minimum(start + split_len, T)
    if end > start:
        b_q = tl.load(q + (i_b * H + i_h) * D + o_d).to(tl.float32) * scale
        b_m = float("-inf")
        b_l = 0.0
        b_acc = tl.zeros([D], dtype=tl.float32)
        for i_t in range(start, end, BT):
            o_t = i_t + tl.arange(0, BT)
            p_kv = ((i_b * T + o_t[:, None]) * H + i_h) * D + o_d[None, :]
            b_s = tl.where(o_t < T, tl.sum(tl.load(k + p_kv, mask=(o_t < T)[:, None], other=0) * b_q[None, :], 1), float("-inf"))
            b_m_new = tl.maximum(b_m, tl.max(b_s, 0))
            b_p = tl.exp(b_s - b_m_new)
            b_alpha = tl.exp(b_m - b_m_new)
            b_acc = b_acc * b_alpha + tl.sum(b_p[:, None] * tl.load(v + p_kv, mask=(o_t < T)[:, None], other=0), 0)
            b_l = b_l * b_alpha + tl.sum(b_p, 0)
            b_m = b_m_new
        i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
        tl.store(o_part + i_bhs * D + o_d, b_acc / b_l)
        tl.store(lse_part + i_bhs, b_m + tl.log(b_l))


@triton.jit
def decode_merge_kernel(
    o_part, lse_part, o, lse, T,
    H: tl.constexpr, D: tl.constexpr, BT: tl.constexpr, NUM_SPLITS: tl.constexpr,
):
    i_b, i_h = tl.program_id(0).to(tl.int64), tl.program_id(1).to(tl.int64)
    o_d = tl.arange(0, D)
    # the same split lengths as decode_fwd_kernel: its empty splits wrote nothing and are skipped
    split_len = tl.cdiv(tl.cdiv(T, NUM_SPLITS), BT) * BT
    b_m = float("-inf")
    b_l = 0.0
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_s in tl.static_range(NUM_SPLITS):
        if i_s * split_len < T:
            i_bhs = (i_b * H + i_h) * NUM_SPLITS + i_s
            b_lse = tl.load(lse_part + i_bhs)
            b_m_new = tl.maximum(b_m, b_lse)
            b_r = tl.exp(b_m - b_m_new)
            b_w = tl.exp(b_lse - b_m_new)
            b_acc = b_acc * b_r + b_w * tl.load(o_part + i_bhs * D + o_d)
            b_l = b_l * b_r + b_w
            b_m = b_m_new
    tl.store(o + (i_b * H + i_h) * D + o_d, b_acc / b_l)
    # the prefix/suffix merge downstream needs the log-sum-exp too
    tl.store(lse + i_b * H + i_h, b_m + tl.log(b_l))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the H200 this split targets; the interpreter has no SMs


def decode(q, k, v):
    B, H, D = q.shape
    T = k.shape[1]
    o = torch.empty_like(q)
    lse = torch.empty(B, H, dtype=torch.float32, device=q.device)
    BT = 64
    # split the KV range until the B*H*num_splits programs give every SM about 64:
    # short programs in many waves, so the last wave's idle SMs cost little,
    # never into more splits than T has tiles of BT
    num_splits = max(1, min(16, triton.cdiv(64 * _num_sms(o.device), B * H), triton.cdiv(T, BT)))
    o_part = torch.empty(B, H, num_splits, D, dtype=torch.float32, device=o.device)
    lse_part = torch.empty(B, H, num_splits, dtype=torch.float32, device=o.device)
    decode_fwd_kernel[(B, H, num_splits)](q, k, v, o_part, lse_part, D**-0.5, T, H=H, D=D, BT=BT, NUM_SPLITS=num_splits)
    decode_merge_kernel[(B, H)](o_part, lse_part, o, lse, T, H=H, D=D, BT=BT, NUM_SPLITS=num_splits)
    return o, lse
