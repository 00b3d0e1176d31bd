"""Plain PyTorch reference: dequantize both MXFP8 operands (e4m3 · 2^(e - 127) per 32) and multiply in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    M, N, K = shape["M"], shape["N"], shape["K"]  # K a multiple of the kernel's BK (64)
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 8).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, generator=g) * 8).to(torch.float8_e4m3fn)
    a_s = torch.randint(120, 128, (M, K // 32), generator=g, dtype=torch.uint8)
    b_s = torch.randint(120, 128, (N, K // 32), generator=g, dtype=torch.uint8)
    # the e4m3 bits as uint8: a float8 tensor cannot be checked for in-place changes (no nan_to_num)
    return {n: v.to(device) for n, v in dict(a=a.view(torch.uint8), a_s=a_s, b=b.view(torch.uint8), b_s=b_s).items()}


def _dequant(x, s):
    return x.view(torch.float8_e4m3fn).double() * torch.exp2(s.double() - 127).repeat_interleave(32, 1)


def reference(a, a_s, b, b_s):
    return (_dequant(a, a_s) @ _dequant(b, b_s).T).float()
