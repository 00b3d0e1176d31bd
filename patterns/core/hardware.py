"""GPU hardware table used by the bottleneck estimate and the validation report.

Figures are vendor datasheet values for dense math (no sparsity), except
`measured_copy_tbps`, which is what a device-to-device copy achieved on a machine
of that kind where we measured it (0 = not measured). Peak rates are TFLOP/s.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GPU:
    name: str
    vendor: str  # nvidia | amd
    sm: int  # NVIDIA compute capability x10 (90 = Hopper); AMD: gfx generation tag
    sm_count: int  # SMs (NVIDIA) or CUs (AMD)
    hbm_tbps: float
    l2_mb: float
    smem_per_sm_kb: int  # max shared memory (LDS) per SM/CU usable by one block
    regs_per_sm: int  # 32-bit registers per SM/CU
    max_threads_per_sm: int
    peak_tflops: dict[str, float] = field(default_factory=dict)
    measured_copy_tbps: float = 0.0
    launch_overhead_us: float = 4.0  # host launch + grid start, typical of Triton's launcher

    @property
    def cuda_sm(self) -> int:
        """Compute capability x10 on NVIDIA, 0 elsewhere (what `by_sm` parameter defaults compare against)."""
        return self.sm if self.vendor == "nvidia" else 0

    @property
    def bandwidth_tbps(self) -> float:
        """Bandwidth a roofline should use: measured where we have it."""
        return self.measured_copy_tbps or self.hbm_tbps

    def peak(self, dtype: str) -> float:
        return self.peak_tflops.get(dtype) or self.peak_tflops["float32"]

    def ridge(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where memory and compute time are equal."""
        return self.peak(dtype) * 1e12 / (self.bandwidth_tbps * 1e12)


_HOPPER_RATES = {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4, "float8": 1978.9, "int8": 1978.9}

GPUS: dict[str, GPU] = {
    g.name.lower(): g
    for g in (
        GPU("H100", "nvidia", 90, 132, 3.35, 50, 227, 65536, 2048, dict(_HOPPER_RATES)),
        GPU("H200", "nvidia", 90, 132, 4.8, 50, 227, 65536, 2048, dict(_HOPPER_RATES), measured_copy_tbps=4.3),
        GPU(
            "A100", "nvidia", 80, 108, 2.039, 40, 163, 65536, 2048,
            {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0, "int8": 624.0},
        ),
        GPU(
            "B200", "nvidia", 100, 148, 8.0, 126, 227, 65536, 2048,
            {"float32": 80.0, "tf32": 1100.0, "bfloat16": 2250.0, "float16": 2250.0, "float8": 4500.0, "int8": 4500.0},
        ),
        GPU(
            "MI300X", "amd", 0, 304, 5.3, 256, 64, 131072, 2048,
            {"float32": 163.4, "tf32": 653.7, "bfloat16": 1307.4, "float16": 1307.4, "float8": 2614.9, "int8": 2614.9},
        ),
    )
}


class UnknownGPU(ValueError):
    pass


def gpu(name: str) -> GPU:
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise UnknownGPU(f"unknown --arch '{name}' (known: {', '.join(g.name for g in GPUS.values())})") from None
