"""The units profilers write, read into one base per quantity.

Nsight Compute picks units automatically (`--print-units auto`, the default):
one CSV may say `nsecond` for a 2 µs kernel and `msecond` for a 4 ms GEMM,
`Kbyte` or `Gbyte`, `Gbyte/second` or `Tbyte/second`. torch.profiler's tables
print `4.123ms` or `812.000us`, and its Chrome traces are in microseconds.
Reading a value with the wrong unit turns a 4 ms GEMM into a 4 µs
"launch-bound" kernel, so every value goes through `convert`.

Bases: time in seconds, data in bytes, rates in bytes (or cycles, instructions)
per second, percentages as percent, counts as they are.
"""
from __future__ import annotations

import re

# decimal prefixes, as ncu writes them (Kbyte is 1000 bytes; ncu uses SI prefixes)
_PREFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "µ": 1e-6, "m": 1e-3, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
_TIME = {"second": 1.0, "sec": 1.0, "s": 1.0, "minute": 60.0, "min": 60.0}
_DATA = {"byte": 1.0, "B": 1.0, "bit": 0.125}
_COUNT = {"cycle", "inst", "warp", "thread", "block", "sector", "request", "transaction", "register", "flop", "op", ""}


class UnitError(ValueError):
    """A unit this module does not know; the message names it."""


def _split(unit: str, bases: dict[str, float] | set[str]) -> tuple[float, str] | None:
    """(scale, base) for a prefixed unit: 'msecond' -> (1e-3, 'second'), 'Gbyte' -> (1e9, 'byte')."""
    for base in sorted(bases, key=len, reverse=True):
        if unit == base or unit == base + "s":  # 'cycles', 'bytes'
            return 1.0, base
        for p, scale in {**_BINARY, **_PREFIX}.items():
            if p and (unit == p + base or unit == p + base + "s"):
                return scale, base
    return None


def kind_of(unit: str) -> str:
    """'time', 'data', 'rate', 'percent', 'count' or 'unknown'."""
    try:
        return convert(1.0, unit)[1]
    except UnitError:
        return "unknown"


def convert(value: float, unit: str) -> tuple[float, str]:
    """`value` in `unit` as (value in the base, kind): (4.1, 'msecond') -> (0.0041, 'time')."""
    u = unit.strip()
    if u in ("%", "percent", "pct"):
        return value, "percent"
    if "/" in u:
        num, _, den = u.partition("/")
        top = _split(num.strip(), {**_DATA, **dict.fromkeys(_COUNT - {""}, 1.0)})
        bottom = _split(den.strip(), _TIME)
        if top is None or bottom is None:
            # per-cycle, per-element rates: a ratio of counts, kept as it is
            if _split(den.strip(), dict.fromkeys(_COUNT - {""}, 1.0)) is not None:
                return value, "count"
            raise UnitError(f"unknown unit '{unit}'")
        (ts, _), (bs, _) = top, bottom
        bscale = _TIME[bottom[1]] * bs
        return value * ts / bscale, "rate"
    if u.lower() in ("hz", "khz", "mhz", "ghz"):
        return value * {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}[u.lower()], "rate"
    t = _split(u, _TIME)
    if t is not None:
        return value * t[0] * _TIME[t[1]], "time"
    d = _split(u, _DATA)
    if d is not None:
        return value * d[0] * _DATA[d[1]], "data"
    c = _split(u, dict.fromkeys(_COUNT - {""}, 1.0))
    if c is not None or u == "":
        return value * (c[0] if c else 1.0), "count"
    raise UnitError(f"unknown unit '{unit}'")


def to_us(value: float, unit: str) -> float:
    """A duration in `unit` (nsecond, usecond, msecond, second, ns, us, ms, s) in microseconds."""
    v, kind = convert(value, unit)
    if kind != "time":
        raise UnitError(f"'{unit}' is not a time unit")
    return v * 1e6


_QUANTITY = re.compile(r"^\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*([A-Za-zµ%/]*)\s*$")


def parse_quantity(text: str, default_unit: str = "") -> tuple[float, str]:
    """'4.123ms' -> (0.004123, 'time'); '812.000us', '2.5 GB/s', '87.5%' likewise (torch.profiler tables)."""
    m = _QUANTITY.match(text)
    if not m:
        raise UnitError(f"not a quantity: '{text}'")
    value = float(m.group(1).replace(",", ""))
    unit = m.group(2) or default_unit
    # torch.profiler and humans write GB, MB, KB for bytes and GB/s for rates
    if unit.endswith("/s"):
        unit = unit[:-2] + "/second"
    return convert(value, unit)
