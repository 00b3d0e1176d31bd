"""Bad input never gives a traceback (issue #20): one line naming the file and what is wrong, exit 2.

One case per item of the issue's list; each runs the real CLI in a fresh process.
(`suggest` on a launcher with `9 ** 9 ** 9` is the arithmetic evaluator's, tested with it.)
"""
import os
import subprocess
import sys

import pytest


def run(args, env=None, cwd=None):
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "TRITON_INTERPRET": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "patterns.cli", *map(str, args)], capture_output=True, text=True, env=full, cwd=cwd, timeout=300)


def one_line_error(r, *fragments):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def where(tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "empty_library").mkdir()
    (tmp_path / "binary.py").write_bytes(b"\x00\x01\x02\xff binary")
    (tmp_path / "syntax.py").write_text("def kda_decode(:\n")
    (tmp_path / "spec_syntax.py").write_text("SPEC = (\n")
    return tmp_path


CASES = {
    "binary candidate": (["validate", "kda_decode", "{t}/binary.py", "--device", "cpu"], {}, ["binary.py"]),
    "syntax-error candidate": (["validate", "kda_decode", "{t}/syntax.py", "--device", "cpu"], {}, ["syntax.py", "line 1"]),
    "spec path with a syntax error": (["validate", "{t}/spec_syntax.py", "--device", "cpu"], {}, ["spec_syntax.py"]),
    "validate --out naming a file": (["validate", "kda_decode", "--device", "cpu", "--out", "{t}/a_file"], {}, ["--out", "a_file", "not a folder"]),
    "validate --out unwritable": (["validate", "kda_decode", "--device", "cpu", "--out", "/proc/no/such"], {}, ["--out", "/proc/no/such"]),
    "suggest --profile naming a folder": (["suggest", "kernels/kda_decode/baseline.py", "--profile", "{t}/a_folder"], {}, ["--profile", "a_folder", "folder"]),
    "missing PATTERNS_LIBRARY": (["list"], {"PATTERNS_LIBRARY": "{t}/no_such_library"}, ["no_such_library", "not found"]),
    "empty PATTERNS_LIBRARY": (["list"], {"PATTERNS_LIBRARY": "{t}/empty_library"}, ["empty_library", "no patterns"]),
    "PATTERNS_REGISTRY naming a file": (["serving", "status"], {"PATTERNS_REGISTRY": "{t}/a_file"}, ["PATTERNS_REGISTRY", "a_file"]),
    "empty search": (["search", ""], {}, ["query is empty"]),
    "index --path naming a file": (["index", "--path", "{t}/a_file"], {}, ["a_file", "not a folder"]),
    "docs into an unwritable folder": (["docs", "/proc/catalog"], {}, ["/proc"]),
    "serving prefill --trace naming a folder": (["serving", "prefill", "--trace", "{t}/a_folder", "--device", "cpu"], {}, ["--trace", "a_folder"]),
    "distill of a missing local path": (["distill", "{t}/no_such_tree"], {}, ["no_such_tree"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2(case, where):
    args, env, fragments = CASES[case]
    fill = lambda s: s.replace("{t}", str(where))  # noqa: E731
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = run([fill(a) for a in args], env={k: fill(v) for k, v in env.items()}, cwd=root)
    one_line_error(r, *[fill(f) for f in fragments])


def test_one_corrupt_review_item_leaves_the_rest_listable(tmp_path):
    reviews = tmp_path / "reviews"
    reviews.mkdir(parents=True)
    (reviews / "broken.json").write_bytes(b"\x00 not json")
    r = run(["review", "list", "--status", "all", "--format", "json"], env={"PATTERNS_AGENT_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "broken.json" in r.stderr and "skipped" in r.stderr
    assert r.stdout.strip() == "[]"
