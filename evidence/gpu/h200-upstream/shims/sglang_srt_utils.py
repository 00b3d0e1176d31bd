"""Stands in for sglang.srt.utils when SGLang's decode attention file is run outside SGLang.

The kernel file imports four device queries from sglang.srt.utils, whose real module imports
SGLang's whole runtime (psutil, fastapi, ...). These are the same queries, for CUDA, written for
this project; nothing else of SGLang is replaced."""
import torch


def is_hip() -> bool:
    return torch.version.hip is not None


def is_gfx95_supported() -> bool:
    return False


def is_gfx1250_supported() -> bool:
    return False


def get_device_core_count(device_id: int = 0) -> int:
    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(device_id).multi_processor_count
    return 0
