"""Plain PyTorch reference: a cumulative sum restarted at every sequence boundary, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, shape["T"] + 1, (shape["B"],), generator=g)
    cu = torch.nn.functional.pad(lens.cumsum(0), (1, 0)).to(torch.int32)
    x = torch.randn(int(lens.sum()), shape["H"], generator=g)
    return {"x": x.to(device), "cu_seqlens": cu.to(device)}


def reference(x: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    cu = cu_seqlens.tolist()
    return torch.cat([x[a:b].double().cumsum(0) for a, b in zip(cu[:-1], cu[1:])]).float()
