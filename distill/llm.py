"""Optional: an OpenAI-compatible model fills a draft's prose from the code.

Configured by environment (PATTERNS_LLM_BASE_URL, PATTERNS_LLM_MODEL,
PATTERNS_LLM_API_KEY or OPENAI_API_KEY) or ~/.config/patterns/config.toml:

    [llm]
    base_url = "http://127.0.0.1:8000/v1"
    model = "qwen2.5-coder"
    api_key_env = "MY_KEY"      # or api_key = "..."

The answer is requested as structured output (a JSON schema) and checked twice:
against the schema (pydantic, lengths included), then for safety -- no code
blocks or statements in prose, no HTML, no URLs outside an allow-list, no
control characters. A rejected answer leaves the draft with its mechanical
fields and a one-line reason. Without an endpoint nothing here runs.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from patterns.core.records import Draft
from patterns.core.schema import AppliesWhen, BottleneckClass, Transformation, Trap

ALLOWED_URL_HOSTS = (
    "github.com/fla-org", "github.com/sgl-project", "github.com/deepseek-ai", "github.com/triton-lang",
    "triton-lang.org", "docs.nvidia.com", "pytorch.org", "arxiv.org",
)


class LLMRejected(ValueError):
    """The model's answer was not used; the message says why in one line."""


class ProseTrap(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fact: str = Field(min_length=10, max_length=240)
    why: str = Field(min_length=10, max_length=400)
    how: str = Field(min_length=10, max_length=400)


class DraftProse(BaseModel):
    """What the model may write: prose only."""

    model_config = ConfigDict(extra="forbid")
    summary: str = Field(min_length=20, max_length=600)
    why: str = Field(min_length=80, max_length=2500)
    applicability: str = Field(min_length=20, max_length=1200)
    transformation: str = Field(min_length=40, max_length=2500, description="how to apply the technique to a kernel that lacks it, step by step in prose")
    bottlenecks: list[Literal[tuple(b.value for b in BottleneckClass)]] = Field(min_length=1, max_length=3)  # type: ignore[valid-type]
    traps: list[ProseTrap] = Field(default_factory=list, max_length=5)


@dataclass
class LLMConfig:
    base_url: str
    model: str
    api_key: str
    timeout: float = 60.0


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "patterns" / "config.toml"


def load_config() -> LLMConfig | None:
    """The endpoint, or None when none is configured (then no LLM step runs)."""
    file_cfg: dict = {}
    path = config_path()
    if path.exists():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            tomllib = None
        if tomllib is not None:
            try:
                file_cfg = tomllib.loads(path.read_text(encoding="utf-8")).get("llm", {})
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
                from patterns.distill.errors import DistillError

                raise DistillError(f"{path}: cannot read: {exc}") from None
    base_url = os.environ.get("PATTERNS_LLM_BASE_URL") or file_cfg.get("base_url")
    model = os.environ.get("PATTERNS_LLM_MODEL") or file_cfg.get("model")
    if not base_url or not model:
        return None
    key = os.environ.get("PATTERNS_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
    if not key and file_cfg.get("api_key_env"):
        key = os.environ.get(file_cfg["api_key_env"], "")
    key = key or file_cfg.get("api_key", "") or "none"
    return LLMConfig(base_url=base_url.rstrip("/"), model=model, api_key=key, timeout=float(file_cfg.get("timeout", 60)))


_CODE = re.compile(
    r"```|<\s*/?\s*[a-zA-Z][^>]*>|^\s*(import\s+\w|from\s+\S+\s+import\s|def\s+\w+\s*\(|class\s+\w+[:(]|#include|rm\s+-|curl\s|wget\s|sudo\s|pip\s+install)"
    r"|\beval\s*\(|\bexec\s*\(|\bos\.system|\bsubprocess\.|__import__",
    re.M,
)
_URL = re.compile(r"https?://[^\s)>\]]+|www\.[^\s)>\]]+")
_INJECTION = re.compile(r"(?i)ignore (all |any )?(previous|prior|above) instructions|system prompt|you are now")


def check_text(field: str, text: str) -> None:
    if any(ord(ch) < 32 and ch not in "\n\t" for ch in text):
        raise LLMRejected(f"{field}: control characters")
    m = _CODE.search(text)
    if m:
        raise LLMRejected(f"{field}: looks like code or markup ({m.group(0).strip()[:30]!r}), prose only")
    for span in re.findall(r"`([^`]*)`", text):
        if len(span) > 80 or "\n" in span:
            raise LLMRejected(f"{field}: inline code longer than 80 characters")
    for url in _URL.findall(text):
        bare = re.sub(r"^https?://", "", url)
        if not any(bare.startswith(h) for h in ALLOWED_URL_HOSTS):
            raise LLMRejected(f"{field}: URL not in the allow-list ({url[:60]})")
    if _INJECTION.search(text):
        raise LLMRejected(f"{field}: instruction-like text")


def check_answer(raw: str) -> DraftProse:
    """Schema first, then safety; raises LLMRejected with a one-line reason."""
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        raise LLMRejected("answer is not JSON") from None
    try:
        prose = DraftProse.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(root)"
        raise LLMRejected(f"schema: {where}: {err['msg']}") from None
    check_text("summary", prose.summary)
    check_text("why", prose.why)
    check_text("applicability", prose.applicability)
    check_text("transformation", prose.transformation)
    for i, t in enumerate(prose.traps):
        for name in ("fact", "why", "how"):
            check_text(f"traps.{i}.{name}", getattr(t, name))
    return prose


SYSTEM = (
    "You document GPU kernel optimization patterns for kernel engineers. "
    "Given recurring facts and code excerpts from upstream projects, describe the technique "
    "they share. Write plain prose (inline `code` spans allowed, no code blocks). "
    "State the mechanism with memory-traffic or FLOP arithmetic in 'why'; in 'transformation' say how to "
    "apply it to a kernel that lacks it; in 'traps' what goes wrong. Answer only with the JSON object."
)


def prompt(draft: Draft, excerpts: list[tuple[str, str]]) -> str:
    parts = [f"Draft id: {draft.id}", f"Title: {draft.title}", f"Condition that holds at every location: {', '.join(draft.signature)}",
             f"Upstream locations per project: {draft.support}", *draft.notes]
    if draft.safety is not None:
        parts.append(f"Safety guess: {draft.safety.value}")
    if draft.resource_limits is not None:
        parts.append(f"Resource facts: {draft.resource_limits.model_dump(exclude_defaults=True)}")
    for u in draft.evidence.upstream[:6]:
        parts.append(f"Location: {u.ref}: {u.note}")
    for where, code in excerpts:
        parts.append(f"--- {where}\n{code}")
    return "\n".join(parts)


def fill(draft: Draft, excerpts: list[tuple[str, str]], cfg: LLMConfig) -> Draft:
    """Ask the model for the draft's prose; return the filled draft or raise LLMRejected."""
    from openai import OpenAI, OpenAIError

    client = OpenAI(base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout, max_retries=0)
    schema = DraftProse.model_json_schema()
    try:
        resp = client.chat.completions.create(
            model=cfg.model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt(draft, excerpts)}],
            response_format={"type": "json_schema", "json_schema": {"name": "draft_prose", "schema": schema, "strict": True}},
            temperature=0,
        )
    except OpenAIError as exc:
        raise LLMRejected(f"endpoint error: {str(exc).splitlines()[0][:160]}") from None
    if not resp.choices:
        raise LLMRejected("answer has no choices")
    msg = resp.choices[0].message
    if getattr(msg, "refusal", None):
        raise LLMRejected(f"model refused: {str(msg.refusal)[:120]}")
    prose = check_answer(msg.content or "")
    return draft.model_copy(update={
        "summary": prose.summary,
        "why": prose.why,
        "applicability": prose.applicability,
        "transformation": Transformation(method=prose.transformation),
        "applies_when": (draft.applies_when or AppliesWhen(bottlenecks=[BottleneckClass(b) for b in prose.bottlenecks])).model_copy(
            update={"bottlenecks": [BottleneckClass(b) for b in prose.bottlenecks]}),
        "traps": [Trap(fact=t.fact, why=t.why, how=t.how) for t in prose.traps],
    })
