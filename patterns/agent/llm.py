"""Optional: an OpenAI-compatible model words hypotheses and writes patches for patterns without a rewrite.

The endpoint is the distiller's (patterns.distill.llm.load_config: the
PATTERNS_LLM_* variables or ~/.config/patterns/config.toml). Answers are
requested as structured output and checked before use; a rejected answer
raises LLMRejected with a one-line reason and the agent carries on without it
(the estimate's hypothesis stays; the pattern is skipped). A patch is only
ever a candidate: it goes through the same gate and review as a codemod's,
and never merges without a person (patterns.agent.review.auto_merge_refusal).
"""
from __future__ import annotations

import ast
import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from patterns.distill.llm import LLMConfig, LLMRejected, check_text, load_config
from patterns.core.records import Hypothesis
from patterns.core.schema import Pattern

__all__ = ["LLMConfig", "LLMRejected", "load_config", "ask_hypothesis", "ask_patch", "check_patch"]

# what a patched kernel file may import and call: the kernel's own world, nothing that reaches the system
ALLOWED_IMPORTS = {"torch", "triton", "math", "typing", "__future__", "functools"}
FORBIDDEN_CALLS = {
    "eval", "exec", "compile", "open", "__import__", "globals", "locals", "setattr", "delattr", "breakpoint", "input", "getattr",
    "vars", "dir",  # vars(torch)[...] = ... patches a module through its dictionary
}
# attributes that reach past the kernel's world: a module re-exported by torch (torch.os.system),
# torch's C bindings (torch._C: dispatch switches), any dunder (__dict__, __globals__, __subclasses__)
FORBIDDEN_ATTRIBUTES = {"_C", "_dynamo", "_ops", "_library", "_utils_internal"}
FORBIDDEN_MODULES = {"os", "sys", "subprocess", "shutil", "socket", "ctypes", "importlib", "builtins", "pathlib"}
MAX_SOURCE = 100_000

SYSTEM = (
    "You are a GPU kernel engineer who applies optimization patterns to Triton kernels. "
    "Answer only with the JSON object the schema describes."
)


class HypothesisAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hypothesis: str = Field(min_length=20, max_length=600, description="why the pattern should help this kernel, with numbers")
    prediction: str = Field(min_length=10, max_length=400, description="what a correctness and timing gate should show if it is right")


class PatchAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = Field(min_length=50, max_length=MAX_SOURCE, description="the whole rewritten Python file")
    summary: str = Field(min_length=10, max_length=400, description="what was changed, in one or two sentences")


def _complete(cfg: LLMConfig, user: str, name: str, model: type[BaseModel]) -> str:
    from openai import OpenAI, OpenAIError

    client = OpenAI(base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout, max_retries=0)
    try:
        resp = client.chat.completions.create(
            model=cfg.model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
            response_format={"type": "json_schema", "json_schema": {"name": name, "schema": model.model_json_schema(), "strict": True}},
            temperature=0,
        )
    except OpenAIError as exc:
        raise LLMRejected(f"endpoint error: {str(exc).splitlines()[0][:160]}") from None
    if not resp.choices:
        raise LLMRejected("answer has no choices")
    msg = resp.choices[0].message
    if getattr(msg, "refusal", None):
        raise LLMRejected(f"model refused: {str(msg.refusal)[:120]}")
    return msg.content or ""


def _parse(raw: str, model: type[BaseModel]) -> BaseModel:
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        raise LLMRejected("answer is not JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise LLMRejected(f"schema: {where}: {err['msg']}") from None


def ask_hypothesis(cfg: LLMConfig, pattern: Pattern, estimate: Hypothesis, source: str) -> Hypothesis:
    """The model's hypothesis for applying `pattern`, given the estimate's; prose checked like the distiller's."""
    user = "\n".join([
        f"Pattern: {pattern.id}: {pattern.title}", f"Mechanism: {pattern.why}",
        f"Analysis of the kernel: {estimate.text}", f"Kernel file:\n{source}",
        "State why this pattern should (or should not) help this kernel, with the numbers, and what a gate would show.",
    ])
    answer = _parse(_complete(cfg, user, "hypothesis", HypothesisAnswer), HypothesisAnswer)
    check_text("hypothesis", answer.hypothesis)
    check_text("prediction", answer.prediction)
    return estimate.model_copy(update={"text": answer.hypothesis, "prediction": answer.prediction, "source": "llm"})


def ask_patch(cfg: LLMConfig, pattern: Pattern, source: str, path: str, launcher: str) -> tuple[str, str]:
    """(patched source, the model's summary) for a pattern without an automatic rewrite; checked by check_patch."""
    user = "\n".join([
        f"Apply the pattern {pattern.id} ({pattern.title}) to this Triton kernel file.",
        f"Method: {pattern.transformation.method}",
        f"Keep the launcher `{launcher}` with the same signature and results; import only {', '.join(sorted(ALLOWED_IMPORTS))}.",
        f"File {path}:\n{source}",
    ])
    raw = _complete(cfg, user, "patch", PatchAnswer)
    return check_patch(raw, pattern, source, path, launcher)


def check_patch(raw: str, pattern: Pattern, original: str, path: str, launcher: str) -> tuple[str, str]:
    """Schema, then the code: parses, imports and calls only the kernel's world, keeps the launcher,
    changes something, and now shows the pattern (`present_when`). LLMRejected otherwise."""
    from patterns.core.facts import FactsError, extract_source
    from patterns.core.library import present

    answer = _parse(raw, PatchAnswer)
    check_text("summary", answer.summary)
    new = answer.source
    try:
        tree = ast.parse(new, filename=path)
    except SyntaxError as exc:
        raise LLMRejected(f"patch does not parse: line {exc.lineno}: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            bad = [n for n in names if n.split(".")[0] not in ALLOWED_IMPORTS]
            if bad:
                raise LLMRejected(f"patch imports {bad[0]} (line {node.lineno}): only {', '.join(sorted(ALLOWED_IMPORTS))}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            raise LLMRejected(f"patch calls {node.func.id}() (line {node.lineno})")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_MODULES:
            raise LLMRejected(f"patch uses {node.id} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and (
            node.attr in FORBIDDEN_MODULES or node.attr in FORBIDDEN_ATTRIBUTES or (node.attr.startswith("__") and node.attr.endswith("__"))
        ):
            raise LLMRejected(f"patch uses .{node.attr} (line {node.lineno})")
    if not any(isinstance(n, ast.FunctionDef) and n.name == launcher for n in tree.body):
        raise LLMRejected(f"patch has no top-level launcher '{launcher}'")
    if new == original:
        raise LLMRejected("patch changes nothing")
    try:
        facts = extract_source(new, path)
    except FactsError as exc:
        raise LLMRejected(f"patch: {str(exc).splitlines()[0]}") from None
    verdict = present(pattern, facts)
    if not verdict.ok:
        raise LLMRejected(f"patch does not apply {pattern.id} (present_when: {'; '.join(verdict.reasons[:1]) or 'does not hold'})")
    return new, answer.summary
