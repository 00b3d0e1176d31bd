"""Mean over each sequence of a ragged batch: the launcher pads the packed tokens to the longest sequence first."""
import torch
import triton
import triton.language as tl


@triton.jit
def mean_pool_kernel(x, out, lengths, T_max, D, BT: tl.constexpr, BD: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs_d = tl.arange(0, BD)
    n = tl.load(lengths + b)
    acc = tl.zeros([BD], dtype=tl.float32)
    for t in range(0, n, BT):
        offs_t = t + tl.arange(0, BT)
        tile = tl.load(x + (b * T_max + offs_t[:, None]) * D + offs_d[None, :], mask=(offs_t[:, None] < n) & (offs_d[None, :] < D), other=0.0)
        acc += tl.sum(tile, 0)
    tl.store(out + b * D + offs_d, acc / n, mask=offs_d < D)


def mean_pool(tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    D = tokens.shape[1]
    padded = torch.nn.utils.rnn.pad_sequence(list(torch.split(tokens, lengths.tolist())), batch_first=True)
    B, T_max = padded.shape[:2]
    out = torch.empty(B, D, dtype=torch.float32, device=tokens.device)
    mean_pool_kernel[(B,)](padded, out, lengths, T_max, D, BT=16, BD=triton.next_power_of_2(D))
    return out
