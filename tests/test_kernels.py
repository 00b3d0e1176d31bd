"""The project's kernels against their plain PyTorch references.

Shapes, dtypes, seeds and tolerances come from each op's SPEC, so the gate and
these tests read one declaration. Outputs are allocated with torch.empty and
NaN-filled (a kernel that leaves part of its output unwritten fails); inputs
the op updates in place are compared after the call; every other input must
come back unchanged.
"""
import pytest
import torch

from patterns.core.examples import compare, nan_filled_empty
from patterns.core.ops import available_ops, load_spec, resolve
from patterns.core.opspec import OpSpec

OPS = available_ops()
SPECS = {op: load_spec(op) for op in OPS}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # the tensors here are tiny: BLAS threads only contend on a loaded 2-core machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _clone(inputs: dict) -> dict:
    return {n: x.clone() if isinstance(x, torch.Tensor) else x for n, x in inputs.items()}


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def check_against_reference(spec: OpSpec, shape: dict, dtype: str, seed: int) -> None:
    inputs = spec.make_inputs(shape, dtype, seed, "cpu")
    ref_inputs = _clone(inputs)
    snapshot = _clone(inputs)
    expected = _as_tuple(resolve(spec, spec.reference)(**ref_inputs))
    with nan_filled_empty():
        out = _as_tuple(resolve(spec, spec.baseline)(**inputs))
    tol = spec.tolerance[dtype]
    assert len(out) == len(spec.outputs), f"returned {len(out)} outputs, SPEC declares {spec.outputs}"
    got = out + tuple(inputs[n] for n in spec.inplace)
    want = expected + tuple(ref_inputs[n] for n in spec.inplace)
    for name, o, r in zip(spec.outputs + spec.inplace, got, want):
        ok, aerr, rerr, reason = compare(o, r, tol.atol, tol.rtol)
        assert ok, f"{name}: {reason} (max abs err {aerr:.3g}, max rel err {rerr:.3g})"
    for name, before in snapshot.items():
        if name not in spec.inplace and isinstance(before, torch.Tensor):
            assert torch.equal(before, inputs[name]), f"input '{name}' was modified"


def _grid(spec: OpSpec, fmt: str) -> list:
    return [
        pytest.param(shape, dtype, seed, id=f"{fmt.format(**shape)}-{dtype}-seed{seed}")
        for shape in spec.shapes
        for dtype in spec.dtypes
        for seed in spec.seeds
    ]


@pytest.mark.parametrize("shape, dtype, seed", _grid(SPECS["kda_decode"], "B{B}-T{T}-H{H}-HV{HV}-K{K}-V{V}"))
def test_kda_decode(shape, dtype, seed):
    check_against_reference(SPECS["kda_decode"], shape, dtype, seed)


@pytest.mark.parametrize("shape, dtype, seed", _grid(SPECS["cp_state_merge"], "N{N}-H{H}-K{K}-V{V}-L{L}"))
def test_cp_state_merge(shape, dtype, seed):
    check_against_reference(SPECS["cp_state_merge"], shape, dtype, seed)


@pytest.mark.parametrize("shape, dtype, seed", _grid(SPECS["decode_attention"], "B{B}-S{S}-HQ{HQ}-HK{HK}-D{D}-P{PAGE}-L{L_MIN}"))
def test_decode_attention(shape, dtype, seed):
    check_against_reference(SPECS["decode_attention"], shape, dtype, seed)


@pytest.mark.parametrize("shape, dtype, seed", _grid(SPECS["rmsnorm_gate"], "N{N}-D{D}"))
def test_rmsnorm_gate(shape, dtype, seed):
    check_against_reference(SPECS["rmsnorm_gate"], shape, dtype, seed)


@pytest.mark.parametrize("shape, dtype, seed", _grid(SPECS["matmul"], "M{M}-N{N}-K{K}"))
def test_matmul(shape, dtype, seed):
    check_against_reference(SPECS["matmul"], shape, dtype, seed)


PARTITIONED = [
    pytest.param(op, dtype, n, id=f"{op}-{dtype}-n{n}")
    for op, spec in SPECS.items() if spec.partition
    for dtype in spec.dtypes
    for n in spec.partition.counts
]


@pytest.mark.parametrize("op, dtype, n", PARTITIONED)
def test_partition_matches_unpartitioned(op, dtype, n):
    """The declared partitioned path runs with the baseline and agrees with the single pass
    (the interpreter computes fp32 dots in fp32, so TF32's error growth cannot show here)."""
    spec = SPECS[op]
    part = spec.partition
    inputs = spec.make_inputs(part.shape, dtype, 0, "cpu")
    if part.unpartitioned is not None:
        expected = part.unpartitioned(_clone(inputs))
    else:
        expected = resolve(spec, spec.reference)(**_clone(inputs))
    with nan_filled_empty():
        out = part.run(resolve(spec, spec.baseline), inputs, n)
    tol = part.tolerance[dtype]
    ok, aerr, rerr, reason = compare(out, expected, tol.atol, tol.rtol)
    assert ok, f"{n} partitions: {reason} (max abs err {aerr:.3g})"


def _perturb(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    assert x.is_floating_point(), "sensitive inputs are float tensors"
    noise = torch.randn(x.shape, generator=gen, dtype=torch.float32)
    return (x.float() + 0.1 * x.float().std().clamp_min(1.) * noise).to(x.dtype)


SENSITIVE = [pytest.param(op, name, id=f"{op}-{name}") for op, spec in SPECS.items() for name in spec.sensitive_inputs]


@pytest.mark.parametrize("op, name", SENSITIVE)
def test_sensitive_input_changes_output(op, name):
    """Perturbing a declared sensitive input moves the reference's outputs past the tolerance,
    so the correctness comparison above can fail on work a kernel skipped."""
    spec = SPECS[op]
    shape, dtype = spec.shapes[-1], spec.dtypes[0]
    inputs = spec.make_inputs(shape, dtype, 0, "cpu")
    reference = resolve(spec, spec.reference)
    base = _clone(inputs)
    want = _as_tuple(reference(**base)) + tuple(base[n] for n in spec.inplace)
    moved = _clone(inputs)
    moved[name] = _perturb(moved[name], torch.Generator().manual_seed(1))
    got = _as_tuple(reference(**moved)) + tuple(moved[n] for n in spec.inplace)
    tol = spec.tolerance[dtype]
    assert not all(compare(g, w, tol.atol, tol.rtol)[0] for g, w in zip(got, want))


@pytest.mark.parametrize("op", OPS)
def test_spec_is_complete(op):
    spec = SPECS[op]
    assert spec.name == op
    assert spec.shapes and spec.gpu_shapes and spec.seeds
    assert set(spec.dtypes) | set(spec.gpu_dtypes) <= set(spec.tolerance)
    if spec.partition:
        assert set(spec.dtypes) | set(spec.gpu_dtypes) <= set(spec.partition.tolerance)
    for shape in spec.gpu_shapes:
        for dtype in spec.gpu_dtypes or spec.dtypes:
            assert spec.bytes_moved(shape, dtype) > 0 and spec.flops(shape, dtype) > 0
    assert set(spec.inplace) <= set(spec.sensitive_inputs)
