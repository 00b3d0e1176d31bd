"""Plain PyTorch reference: softmax, top-k, renormalised weights, in float64."""
import torch


def make_inputs(shape: dict, seed: int, device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"logits": torch.randn(shape["M"], shape["E"], generator=g).to(device), "top_k": shape["K"]}


def reference(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    w, ids = torch.topk(torch.softmax(logits.double(), -1), top_k, dim=-1)
    return (w / w.sum(-1, keepdim=True)).float(), ids.to(torch.int32)
