"""The evidence bundle on disk: JSON (an EvidenceBundle, atomically written) plus a Markdown summary.

`<out>/<op>--<candidate>.json` round-trips through `EvidenceBundle.model_validate_json`;
`<out>/<op>--<candidate>.md` is for a reviewer: the verdict, per shape the error
and the speed ratio, the partition curve, every check with its local reason,
and the environment it was measured in.
"""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from patterns.core.files import write_atomic
from patterns.core.records import CheckResult, EvidenceBundle

MARK = {True: "pass", False: "FAIL", None: "not run"}


def environment(device: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    import torch
    import triton

    env: dict[str, Any] = {
        "device": device,
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None,
    }
    if env["commit"]:  # None where the tree is not a git checkout (a copied tree on a GPU box)
        env["dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    else:
        env["commit"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu=props.name,
            capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            l2_bytes=getattr(props, "L2_cache_size", None),
            cuda=torch.version.cuda,
            driver=_driver_version(),
        )
    else:
        env["gpu"] = None
    env.update(extra or {})
    return env


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        ).stdout
        return out.strip().splitlines()[0] if out.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def bundle_stem(bundle: EvidenceBundle) -> str:
    return f"{bundle.op}--{Path(bundle.candidate).stem}"


def write_bundle(bundle: EvidenceBundle, out_dir: Path) -> tuple[Path, Path]:
    stem = bundle_stem(bundle)
    json_path, md_path = Path(out_dir) / f"{stem}.json", Path(out_dir) / f"{stem}.md"
    write_atomic(json_path, bundle.model_dump_json(indent=2) + "\n")
    write_atomic(md_path, markdown(bundle))
    return json_path, md_path


def read_bundle(path: Path) -> EvidenceBundle:
    return EvidenceBundle.model_validate_json(Path(path).read_text())


def verdict(bundle: EvidenceBundle) -> str:
    """The bundle's verdict for a reader: FAIL, REJECTED (an integrity check failed) or pass, with the layers not run here."""
    if not bundle.passed:
        return bundle.verdict.upper()
    pending = sorted({c.layer for c in bundle.checks if c.passed is None})
    return "pass" + (f" ({', '.join(pending)} not run here)" if pending else "")


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in x.items())
    return "" if x is None else str(x)


def _shape(c: CheckResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in c.shape.items())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(bundle: EvidenceBundle) -> str:
    lines = [
        f"# Evidence: {bundle.op}",
        "",
        f"- verdict: **{verdict(bundle)}**",
        f"- candidate: `{bundle.candidate}`",
        f"- baseline: `{bundle.baseline}`",
        f"- created: {bundle.created}",
        "",
        "## Per shape",
        "",
        "rel err = max|candidate - reference| / max|reference|; ratio = baseline time / candidate time (> 1 is faster).",
        "",
        "| shape | max abs err | rel err | baseline rel err | bit-identical to baseline | ratio | 95% CI | achieved |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    speed = {_shape(c): c for c in bundle.checks if c.name == "speed" and c.passed is not None}
    for c in bundle.checks:
        if c.name != "correctness":
            continue
        d, s = c.details, speed.pop(_shape(c), None)
        ratio = ci = achieved = ""
        if s is not None:
            ratio, ci = f"{s.details['ratio']:.3f}", "[{:.3f}, {:.3f}]".format(*s.details["ci95"])
            achieved = _achieved(s.details)
        lines.append(
            f"| {_shape(c)} | {_fmt(d.get('max_abs_err'))} | {_fmt(d.get('max_rel_err'))} | {_fmt(d.get('baseline_max_rel_err'))} "
            f"| {d.get('bit_identical_to_baseline')} | {ratio} | {ci} | {achieved} |"
        )
    for key, s in speed.items():  # performance shapes outside the correctness grid
        ci = "[{:.3f}, {:.3f}]".format(*s.details["ci95"])
        lines.append(f"| {key} |  |  |  |  | {s.details['ratio']:.3f} | {ci} | {_achieved(s.details)} |")
    for c in (c for c in bundle.checks if c.layer == "partition" and c.details.get("candidate")):
        lines += ["", f"## Partitioned vs unpartitioned ({c.details['axis']}, {_shape(c)})", ""]
        lines += ["| partitions | candidate rel err | vs own n=1 | baseline rel err |", "| --- | --- | --- | --- |"]
        base = {p["n"]: p for p in c.details.get("baseline", [])}
        for p in c.details["candidate"]:
            b = base.get(p["n"], {})
            lines.append(f"| {p['n']} | {_fmt(p.get('rel_err', p.get('error')))} | {_fmt(p.get('rel_err_vs_unpartitioned'))} | {_fmt(b.get('rel_err'))} |")
    lines += ["", "## Checks", "", "| layer | check | shape | result | reason |", "| --- | --- | --- | --- | --- |"]
    for c in bundle.checks:
        lines.append(f"| {c.layer} | {c.name} | {_shape(c)} | {MARK[c.passed]} | {_cell(c.reason)} |")
    lines += ["", "## Environment", ""]
    lines += [f"- {k}: {_fmt(v)}" for k, v in bundle.environment.items()]
    return "\n".join(lines) + "\n"


def _achieved(d: dict[str, Any]) -> str:
    if d.get("bound") == "compute" and "candidate_fraction_of_matmul" in d:
        return f"{d['candidate_TFLOPs']:.1f} TFLOP/s = {d['candidate_fraction_of_matmul']:.0%} of matmul"
    if "candidate_fraction_of_copy" in d:
        return f"{d['candidate_GBps']:.0f} GB/s = {d['candidate_fraction_of_copy']:.0%} of copy"
    if "candidate_fraction_of_matmul" in d:
        return f"{d['candidate_TFLOPs']:.1f} TFLOP/s = {d['candidate_fraction_of_matmul']:.0%} of matmul"
    return ""
