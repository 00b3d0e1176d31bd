"""Retriever: estimate arithmetic, embeddings, the ChromaDB index, suggest's outputs and its bad input."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from patterns.core.facts import extract_file, extract_source
from patterns.core.hardware import gpu
from patterns.core.library import LIBRARY_DIR, load_library
from patterns.retriever.estimate import Unknown, estimate, safe_eval
from patterns.core.records import SuggestReport
from patterns.core.schema import BottleneckClass

ROOT = Path(__file__).resolve().parents[1]
TF32 = LIBRARY_DIR / "tf32x3_dot_precision"


def run_cli(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "patterns.cli", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


# --------------------------------------------------------------------------------------
# estimate
# --------------------------------------------------------------------------------------


def test_estimate_counts_bytes_and_dot_flops_exactly():
    f = extract_file(TF32 / "before.py")
    a = estimate(f, f.kernels[0], gpu("h200"), {"N": 64, "K": 64, "V": 64}, dtype="fp32")
    n = a.primary.numbers
    # grid cdiv(V, BV=32) = 2 programs; each reads h0 [BK,BV], N x (M [BK,BK] + h_local [BK,BV]), writes [BK,BV]
    per_program = 64 * 32 + 64 * (64 * 64 + 64 * 32) + 64 * 32
    assert n["programs"] == 2
    assert n["bytes"] == 2 * per_program * 4
    assert n["dot_flops"] == 2 * (2 * 64 * 64 * 32) * 64
    assert a.primary.cls == BottleneckClass.occupancy  # 2 programs on 132 SMs
    assert BottleneckClass.numerics in a.classes


def test_estimate_without_shapes_says_what_is_missing():
    f = extract_file(TF32 / "before.py")
    a = estimate(f, f.kernels[0], gpu("h200"), {})
    assert a.primary.cls == BottleneckClass.numerics  # a static hazard needs no shapes
    guess = next(b for b in a.others if "not sized" in b.rationale[0])
    # the launcher unpacks N, K, V = h_local.shape: the tensors are what the user gives
    assert "pass --input h0=D0xD1:DTYPE --input h_local=D0xD1:DTYPE;" in guess.rationale[0]


def test_safe_eval_is_arithmetic_only():
    assert safe_eval("triton.cdiv(V, BV) * max(2, K // 4)", {"V": 100, "BV": 32, "K": 64}) == 4 * 16
    for bad in ("__import__('os').system('true')", "open('x')", "(lambda: 1)()", "x.shape"):
        with pytest.raises(Unknown):
            safe_eval(bad, {})


def test_grid_fill_of_a_decode_grid():
    src = '''
import torch, triton, triton.language as tl

@triton.jit
def decode_kernel(x, o, T, D: tl.constexpr):
    i_bh = tl.program_id(0)
    o_d = tl.arange(0, D)
    b_acc = tl.zeros([D], dtype=tl.float32)
    for i_t in range(T):
        b_acc += tl.load(x + (i_bh * T + i_t) * D + o_d).to(tl.float32)
    tl.store(o + i_bh * D + o_d, b_acc)

def decode(x):
    B, H, T, D = x.shape
    o = torch.empty(B, H, D, device=x.device)
    decode_kernel[(B * H,)](x, o, T, D=D)
    return o
'''
    f = extract_source(src, "decode.py")
    a = estimate(f, f.kernels[0], gpu("h200"), {"B": 1, "H": 32, "T": 32768, "D": 128})
    assert a.primary.cls == BottleneckClass.occupancy
    assert a.numbers["programs"] == 32
    assert a.numbers["sm_fill"] == pytest.approx(32 / 132, abs=1e-3)
    # x in bf16 (the default dtype); o = torch.empty(B, H, D) is float32, as torch makes it
    assert a.numbers["bytes"] == 32 * (32768 * 128 * 2 + 128 * 4)


_GEMM = """
import triton, triton.language as tl

@triton.jit
def mm_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    i_m, i_n = tl.program_id(0), tl.program_id(1)
    o_m, o_n, o_k = i_m * BM + tl.arange(0, BM), i_n * BN + tl.arange(0, BN), tl.arange(0, BK)
    b_acc = tl.zeros([BM, BN], dtype=tl.float32)
    for i_k in range(0, K, BK):
        b_acc += tl.dot(tl.load(a + o_m[:, None] * K + (i_k + o_k)[None, :]), tl.load(b + (i_k + o_k)[:, None] * N + o_n[None, :]))
    tl.store(c + o_m[:, None] * N + o_n[None, :], b_acc)

def mm(a, b, c, M, N, K):
    mm_kernel[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](a, b, c, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=64, num_warps=WARPS)
"""


@pytest.mark.parametrize("bm,bn,warps,spills", [(128, 256, 8, False), (128, 128, 4, False), (64, 64, 4, False), (256, 256, 4, True)])
def test_register_estimate_of_a_gemm_tile(bm, bn, warps, spills):
    """Triton's matmul-tutorial tiles (128x256 at 8 warps, 128x128 at 4) fit; a 256x256 fp32 accumulator over 128 threads does not."""
    src = _GEMM.replace("BLOCK_M", str(bm)).replace("BLOCK_N", str(bn)).replace("WARPS", str(warps))
    f = extract_source(src, "mm.py")
    a = estimate(f, f.kernels[0], gpu("h200"), {"M": 8192, "N": 8192, "K": 8192})
    assert (a.numbers["regs_per_thread_est"] >= 255) == spills
    assert any("spills" in r for b in [a.primary, *a.others] for r in b.rationale) == spills


_LOOKUP = """
import triton, triton.language as tl

@triton.jit
def scale_kernel(x, table, y, N, C: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    p_t = table + OFFSET
    tl.store(y + o, tl.load(x + o) * tl.load(p_t))
"""


@pytest.mark.parametrize("offset,holds", [
    ("o % C", True),           # a C-entry table every program re-reads
    ("(o // 4) % 128", True),  # a literal modulus
    ("o", False),              # the stream itself
    ("o % pid", False),        # the modulus comes from the program id: no shared table
])
def test_modulo_indexed_load(offset, holds):
    from patterns.core.predicates import Subject, evaluate
    from patterns.core.schema import Condition

    f = extract_source(_LOOKUP.replace("OFFSET", offset), "lookup.py")
    v = evaluate(Condition.model_validate("modulo_indexed_load"), Subject(f, f.kernels[0]))
    assert v.ok == holds, v.reasons
    if holds:
        assert v.lines == [9]


# --------------------------------------------------------------------------------------
# embeddings and the index
# --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_numpy_encoder_matches_sentence_transformers():
    """The index and the queries are embedded in numpy; sentence-transformers on the same folder is the reference."""
    from sentence_transformers import SentenceTransformer

    from patterns.retriever.embedding import MAX_TOKENS, QUERY_TOKENS, NumpyEncoder, model_dir

    reference = SentenceTransformer(str(model_dir()), device="cpu")
    assert reference.max_seq_length == MAX_TOKENS
    # real pattern texts (all longer than MAX_TOKENS: truncation), short queries, one token, non-ASCII
    texts = [e.pattern.search_text() for e in load_library()[:6]]
    texts += ["split the KV axis of a decode kernel that under-fills the GPU", "fp32 dot chain loses precision in TF32", "x", "µs — naïve"]
    enc = NumpyEncoder()
    ours = enc(texts, MAX_TOKENS, threads=2)
    ref = reference.encode(texts, normalize_embeddings=True, batch_size=4)
    assert np.abs(ours - ref).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    # one text alone, or packed with others, embeds the same
    assert np.abs(enc(texts[-3:], MAX_TOKENS) - ours[-3:]).max() < 1e-6
    # the query length: the reference truncated the same way
    reference.max_seq_length = QUERY_TOKENS
    assert np.abs(enc(texts[:2], QUERY_TOKENS) - reference.encode(texts[:2], normalize_embeddings=True)).max() < 1e-5


@pytest.fixture()
def small_library(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    for e in load_library()[:3]:
        shutil.copytree(e.folder, lib / e.id)
    return lib


@pytest.mark.slow
def test_index_is_incremental_and_recovers_from_corruption(small_library, tmp_path, monkeypatch):
    from patterns.retriever.embedding import embed_documents, embed_queries
    from patterns.retriever.index import SNAPSHOT, build_index, load_snapshot, similarities

    monkeypatch.setenv("PATTERNS_LIBRARY", str(small_library))
    idx = tmp_path / "idx"
    entries = load_library(small_library)
    s = build_index(entries, path=idx)
    assert (s.added, s.updated, s.removed, s.unchanged) == (3, 0, 0, 0)
    assert load_snapshot(entries, idx) is not None
    s = build_index(entries, path=idx)
    assert (s.added, s.updated, s.unchanged) == (0, 0, 3)
    # generality derived by other predicate or extractor code is stale: re-derived, nothing re-embedded
    snap = json.loads((idx / SNAPSHOT).read_text())
    (idx / SNAPSHOT).write_text(json.dumps({**snap, "code": "other"}))
    assert load_snapshot(entries, idx) is None
    s = build_index(entries, path=idx)
    assert (s.added, s.updated, s.unchanged) == (0, 0, 3) and load_snapshot(entries, idx) is not None
    # edit one pattern's summary: only it is re-embedded
    y = small_library / entries[0].id / "pattern.yaml"
    y.write_text(y.read_text().replace(entries[0].pattern.title, entries[0].pattern.title + " (edited)"))
    entries = load_library(small_library)
    assert load_snapshot(entries, idx) is None  # stale
    s = build_index(entries, path=idx)
    assert (s.added, s.updated, s.unchanged) == (0, 1, 2)
    shutil.rmtree(small_library / entries[2].id)
    entries = load_library(small_library)
    s = build_index(entries, path=idx)
    assert (s.removed, s.unchanged) == (1, 2)
    # a corrupt snapshot is rebuilt, not an error
    (idx / SNAPSHOT).write_bytes(b"not json")
    query = "split the KV axis of a decode kernel"
    sims = similarities(query, entries, path=idx)
    assert set(sims) == {e.id for e in entries}
    assert load_snapshot(entries, idx) is not None
    # the plain-Python ranking through the snapshot and the query cache is the cosine of the two embeddings
    q = embed_queries([query])[0]
    docs = embed_documents([e.pattern.search_text() for e in entries])
    for e, doc in zip(entries, docs):
        assert sims[e.id] == pytest.approx(float(q @ doc), abs=1e-6)
    assert similarities(query, entries, path=idx) == sims  # second time from the query cache


def test_library_snapshot_is_used_only_for_the_same_content(small_library, tmp_path, monkeypatch):
    """suggest reads the validated library back from a JSON snapshot; any change to a pattern validates it again."""
    import patterns.core.library as library

    cache = tmp_path / "libcache"
    monkeypatch.setenv("PATTERNS_LIBRARY_CACHE", str(cache))
    monkeypatch.delenv("PATTERNS_NO_LIBRARY_CACHE", raising=False)
    library._load_cached.cache_clear()
    first = library.load_library(small_library)
    assert len(list(cache.glob("*.json"))) == 1
    library._load_cached.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(library, "load_pattern", lambda path: pytest.fail("validated again although unchanged"))
        again = library.load_library(small_library)
    assert [e.pattern for e in again] == [e.pattern for e in first]
    assert [e.folder for e in again] == [e.folder for e in first]
    # an edit: the new content, validated; the stale snapshot is replaced
    y = small_library / first[0].id / "pattern.yaml"
    y.write_text(y.read_text().replace(first[0].pattern.title, "Edited title", 1))
    library._load_cached.cache_clear()
    assert library.load_library(small_library)[0].pattern.title == "Edited title"
    assert len(list(cache.glob("*.json"))) == 1
    # an invalid pattern is reported, whatever was cached before
    y.write_text(y.read_text() + "\nnot_a_field: 1\n")
    library._load_cached.cache_clear()
    with pytest.raises(library.LibraryError, match="not_a_field: unknown field"):
        library.load_library(small_library)
    # a corrupt snapshot only costs the validation
    y.write_text(y.read_text().replace("\nnot_a_field: 1\n", ""))
    library._load_cached.cache_clear()
    library.load_library(small_library)
    (snap,) = cache.glob("*.json")
    snap.write_bytes(b"garbage")
    library._load_cached.cache_clear()
    assert library.load_library(small_library)[0].pattern.title == "Edited title"
    library._load_cached.cache_clear()
    # a planted pickle in its place is data that does not parse: it runs nothing
    import pickle

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    snap.write_bytes(pickle.dumps(Payload()))
    assert library.load_library(small_library)[0].pattern.title == "Edited title"
    assert not marker.exists()
    library._load_cached.cache_clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def chroma_server(tmp_path):
    chroma = shutil.which("chroma")
    if chroma is None:
        pytest.fail("the `chroma` command (chromadb) is not installed")
    port = _free_port()
    proc = subprocess.Popen([chroma, "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/v2/heartbeat", timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("chroma run did not come up within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.slow
def test_suggest_and_search_against_a_chroma_server(chroma_server, small_library, tmp_path):
    env = {"PATTERNS_LIBRARY": str(small_library), "PATTERNS_INDEX_DIR": str(tmp_path / "unused")}
    r = run_cli("index", "--chroma-url", chroma_server, env=env)
    assert r.returncode == 0, r.stderr
    assert "3 added" in r.stdout
    kernel = next(e for e in load_library(small_library) if not e.pattern.example.gpu_only).file("before.py")
    r = run_cli("suggest", kernel, "--chroma-url", chroma_server, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    report = SuggestReport.model_validate_json(r.stdout)
    assert report.kernels
    r = run_cli("search", "reduce precision error", "--chroma-url", chroma_server, "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == 3
    assert not (tmp_path / "unused" / "snapshot.json").exists()  # the server, not the embedded index, answered


# --------------------------------------------------------------------------------------
# suggest outputs and bad input
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def index_env(tmp_path_factory):
    """A built embedded index over the real library, shared by the CLI tests."""
    idx = tmp_path_factory.mktemp("idx")
    env = {"PATTERNS_INDEX_DIR": str(idx)}
    r = run_cli("index", env=env)
    assert r.returncode == 0, r.stderr
    return env


def test_suggest_json_matches_documented_schema(index_env):
    import jsonschema

    r = run_cli("suggest", TF32 / "before.py", "--shape", "N=64", "--shape", "K=64", "--shape", "V=64", "--dtype", "fp32", "--format", "json", env=index_env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    schema = json.loads((ROOT / "docs" / "suggest.schema.json").read_text())
    jsonschema.validate(out, schema)
    assert schema == SuggestReport.model_json_schema(), "docs/suggest.schema.json is stale: regenerate it"
    k = out["kernels"][0]
    assert k["bottleneck"]["cls"] in {"occupancy-bound", "memory-bound"}
    ids = [s["pattern_id"] for s in k["suggestions"]]
    assert "tf32x3_dot_precision" in ids[:3]
    top = next(s for s in k["suggestions"] if s["pattern_id"] == "tf32x3_dot_precision")
    assert top["lines"] == [24] and top["upstream"] and top["safety"] == "numerics-changing"


def test_already_applied_is_never_suggested(index_env):
    r = run_cli("suggest", TF32 / "after.py", "--format", "json", env=index_env)
    assert r.returncode == 0, r.stderr
    k = json.loads(r.stdout)["kernels"][0]
    assert "tf32x3_dot_precision" in [s["pattern_id"] for s in k["already_applied"]]
    assert "tf32x3_dot_precision" not in [s["pattern_id"] for s in k["suggestions"]]


def test_sarif_loads_in_sarif_tools(index_env, tmp_path):
    r = run_cli("suggest", TF32 / "before.py", "--format", "sarif", env=index_env)
    assert r.returncode == 0, r.stderr
    sarif = json.loads(r.stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert any(res["ruleId"] == "tf32x3_dot_precision" for res in results)
    path = tmp_path / "out.sarif"
    path.write_text(r.stdout)
    tool = shutil.which("sarif")
    assert tool, "sarif-tools is a test dependency"
    summary = subprocess.run([tool, "summary", str(path)], capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "tf32x3_dot_precision" in summary.stdout or "note" in summary.stdout.lower()


BAD_INPUTS = {
    "not-python": ("notes.txt", "this is : not python (", []),
    "syntax-error": ("k.py", "import triton\n@triton.jit\ndef k(x:\n    pass\n", []),
    "no-kernel": ("k.py", "def f():\n    return 1\n", []),
    "unknown-kernel": ("k.py", None, ["--kernel", "nope"]),
    "bad-shape": ("k.py", None, ["--shape", "B8"]),
    "bad-shape-value": ("k.py", None, ["--shape", "B=eight"]),
    "bad-arch": ("k.py", None, ["--arch", "v100x"]),
    "bad-profile": ("k.py", None, ["--profile", "PROFILE"]),
    "missing-file": (None, None, []),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(case, tmp_path, index_env):
    name, text, extra = BAD_INPUTS[case]
    if name is None:
        target = tmp_path / "missing.py"
    else:
        target = tmp_path / name
        target.write_text(text if text is not None else (TF32 / "before.py").read_text())
    (tmp_path / "PROFILE").write_text('{"traceEvents": "nope"}')
    extra = [str(tmp_path / "PROFILE") if x == "PROFILE" else x for x in extra]
    r = run_cli("suggest", target, *extra, env=index_env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr


def test_corrupt_index_is_rebuilt(tmp_path):
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "snapshot.json").write_bytes(b"\x00garbage")
    (idx / "chroma").mkdir()
    (idx / "chroma" / "chroma.sqlite3").write_bytes(b"not a database")
    r = run_cli("suggest", TF32 / "before.py", "--format", "json", env={"PATTERNS_INDEX_DIR": str(idx)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernels"]


# --------------------------------------------------------------------------------------
# profiles replace the estimate
# --------------------------------------------------------------------------------------

NCU_CSV = """==PROF== Connected to process 1234
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__grid_size","launch__waves_per_multiprocessor"
"","","","","","","","","","","","nsecond","%","%","",""
"0","1234","python","h","state_merge_kernel","1","7","(128, 1, 1)","(2, 1, 1)","0","9.0","41,216","3.10","1.20","2","0.02"
"1","1234","python","h","state_merge_kernel","1","7","(128, 1, 1)","(2, 1, 1)","0","9.0","40,960","3.00","1.10","2","0.02"
"""


def _trace(durs_us, gap_us):
    ev, t = [], 0.0
    for d in durs_us:
        ev.append({"ph": "X", "cat": "kernel", "name": "state_merge_kernel", "ts": t, "dur": d, "pid": 0, "tid": 7})
        t += d + gap_us
    return json.dumps({"traceEvents": ev})


def test_ncu_profile_drives_the_verdict(tmp_path):
    from patterns.retriever.profile import load_profile

    p = tmp_path / "ncu.csv"
    p.write_text(NCU_CSV)
    bs = load_profile(p, "state_merge_kernel")
    assert bs[0].cls == BottleneckClass.occupancy and bs[0].source == "ncu"
    assert bs[0].numbers["duration_us"] == pytest.approx(41.088)
    assert bs[0].numbers["waves"] == 0.02


def test_torch_trace_with_idle_gaps_is_launch_bound(tmp_path):
    from patterns.retriever.profile import load_profile

    p = tmp_path / "trace.json"
    p.write_text(_trace([3.0] * 20, 12.0))
    bs = load_profile(p, "state_merge_kernel")
    assert bs[0].cls == BottleneckClass.launch
    assert bs[0].numbers["gpu_idle_fraction"] == pytest.approx(1 - 60 / (20 * 15 - 12), abs=1e-3)


def test_profile_errors_name_the_file(tmp_path):
    from patterns.retriever.profile import ProfileError, load_profile

    p = tmp_path / "x.csv"
    p.write_text('"ID","Kernel Name"\n"0","k"\n')
    with pytest.raises(ProfileError, match="x.csv: column"):
        load_profile(p, "k")


def test_an_index_that_must_be_built_without_chromadb_is_a_one_line_error(tmp_path, monkeypatch):
    """A GPU box with the package but not chromadb: a clear error instead of a traceback."""
    import sys

    from patterns.core.library import load_library
    from patterns.retriever.index import IndexError_, ranking_data

    monkeypatch.setitem(sys.modules, "chromadb", None)
    with pytest.raises(IndexError_, match=r"chromadb is not installed"):
        ranking_data(["a kernel"], load_library(), path=tmp_path / "index")
