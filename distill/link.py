"""Cross-file facts for one project: what a single-file extractor cannot see.

* a @triton.jit helper imported from another module (`from fla.ops.utils.op import exp`)
  has its calls inlined at the call site, tagged `via`, as patterns.core.facts does
  for helpers of the same file;
* a module-level alias (`gather = tl.gather`, `make_tensor_descriptor =
  triton.language.make_tensor_descriptor`) is resolved to the Triton name;
* a launch `kernel[grid](...)` in another file is attached to the kernel
  (LaunchFacts.path names the launching file);
* a tensor descriptor passed in as a kernel parameter (`a_desc.load([...])`)
  is marked as such (receiver `TensorDescriptor`), as one made in the kernel is.

Relative imports are resolved against the importing module's package.
"""
from __future__ import annotations

import re

from patterns.distill.scan import FileRecord
from patterns.core.facts_types import CallSite, KernelFacts

_DESC_PARAM = re.compile(r"(?i)(^|_)(desc|descriptor|tma|tensor_map)(_|$)|_desc$|^desc")
_DESC_METHODS = ("load", "store", "gather", "scatter", "atomic_add", "atomic_max", "atomic_min")
_TRITON_PREFIXES = ("triton.language.", "tl.")
_MAX_DEPTH = 4


class Linker:
    def __init__(self, records: list[FileRecord]):
        self.py = [r for r in records if r.py is not None]
        self.modules = {r.py.module: r for r in self.py}
        self.kernels = {(r.py.module, k.name): k for r in self.py for k in r.py.facts.kernels}
        self._expanded: dict[tuple[str, str], list[CallSite]] = {}
        self.stats = {"helpers_inlined": 0, "aliases_resolved": 0, "launches_linked": 0, "descriptor_params": 0}

    # -- name resolution -------------------------------------------------------------------
    def _candidates(self, qualified: str, module: str) -> list[tuple[str, str]]:
        """(module, attribute) pairs a dotted name may refer to, absolute first, then relative."""
        out = []
        if "." in qualified:
            mod, attr = qualified.rsplit(".", 1)
            out.append((mod, attr))
            parts = module.split(".")
            for i in range(len(parts), 0, -1):
                out.append((".".join(parts[:i]) + "." + mod, attr))
        else:
            out.append((module, qualified))
        return out

    def resolve_kernel(self, qualified: str, module: str) -> tuple[str, KernelFacts] | None:
        for mod, attr in self._candidates(qualified, module):
            rec = self.modules.get(mod)
            if rec is not None:
                attr = rec.py.kernel_aliases.get(attr, attr)  # k = triton.jit(...)(f)
            k = self.kernels.get((mod, attr))
            if k is not None:
                return mod, k
        return None

    def resolve_alias(self, qualified: str, module: str) -> str:
        """`fla.ops.utils.op.gather` -> `tl.gather` when that module binds it to a Triton name."""
        for mod, attr in self._candidates(qualified, module):
            rec = self.modules.get(mod)
            if rec is None:
                continue
            text = rec.py.facts.constants.get(attr, "")
            if not re.fullmatch(r"[\w.]+", text or ""):
                return qualified
            head, _, rest = text.partition(".")
            full = rec.py.facts.imports.get(head, head)
            full = {"triton.language": "tl", "triton.language.extra.libdevice": "libdevice"}.get(full, full)
            name = f"{full}.{rest}" if rest else full
            if name.startswith("triton.language."):
                name = "tl." + name.removeprefix("triton.language.")
            return name if name.startswith(("tl.", "libdevice.", "triton.")) else qualified
        return qualified

    # -- passes ------------------------------------------------------------------------------
    def link(self) -> dict[str, int]:
        for r in self.py:
            for k in r.py.facts.kernels:
                self._resolve_aliases(k, r.py.module)
        for r in self.py:
            local = {k.name for k in r.py.facts.kernels}
            for k in r.py.facts.kernels:
                self._inline(k, r.py.module, local)
                self._descriptor_params(k)
        self._launches()
        return self.stats

    def _resolve_aliases(self, k: KernelFacts, module: str) -> None:
        for c in k.calls:
            if "." in c.name and not c.name.startswith(("tl.", ".")):
                new = self.resolve_alias(c.name, module)
                if new != c.name:
                    c.name = new
                    self.stats["aliases_resolved"] += 1
            for attr in ("receiver", "first_arg_origin"):
                v = getattr(c, attr)
                if v and not v.startswith("tl."):
                    setattr(c, attr, self.resolve_alias(v, module))
        for var, origin in list(k.origins.items()):
            if origin and not origin.startswith("tl."):
                k.origins[var] = self.resolve_alias(origin, module)

    def _expand(self, module: str, k: KernelFacts, depth: int, seen: frozenset) -> list[CallSite]:
        key = (module, k.name)
        if key in self._expanded:
            return self._expanded[key]
        out: list[CallSite] = []
        local = {x.name for x in self.modules[module].py.facts.kernels} if module in self.modules else set()
        for c in k.calls:
            out.append(c)
            if depth >= _MAX_DEPTH or c.via or c.name in local or c.name.startswith(("tl.", ".")):
                continue
            hit = self.resolve_kernel(c.name, module)
            if hit is None or (hit[0], hit[1].name) in seen:
                continue
            mod, callee = hit
            for inner in self._expand(mod, callee, depth + 1, seen | {(mod, callee.name)}):
                out.append(inner.model_copy(update={"via": inner.via or callee.name, "loops": c.loops + inner.loops}))
        self._expanded[key] = out
        return out

    def _inline(self, k: KernelFacts, module: str, local: set[str]) -> None:
        before = len(k.calls)
        calls = self._expand(module, k, 0, frozenset({(module, k.name)}))
        if len(calls) != before:
            self.stats["helpers_inlined"] += 1
            k.calls = calls
            helpers = {c.via for c in calls if c.via}
            k.helpers = sorted(set(k.helpers) | helpers)

    def _descriptor_params(self, k: KernelFacts) -> None:
        params = {p.name: p for p in k.params}
        for c in k.calls:
            head, _, method = c.name.rpartition(".")
            if c.receiver or method not in _DESC_METHODS or head not in params or head in k.origins:
                continue
            p = params[head]
            if "escriptor" in p.annotation or _DESC_PARAM.search(head):
                c.receiver = "TensorDescriptor"
                self.stats["descriptor_params"] += 1

    def _launches(self) -> None:
        for r in self.py:
            facts = r.py.facts
            local = {k.name for k in facts.kernels}
            for la in facts.launches:
                if "." not in la.kernel and r.py.kernel_aliases.get(la.kernel, la.kernel) in local:
                    continue
                head, _, rest = la.kernel.partition(".")
                full = facts.imports.get(head)
                qualified = (f"{full}.{rest}" if rest else full) if full else la.kernel
                hit = self.resolve_kernel(qualified, r.py.module)
                if hit is None or hit[1].path == facts.path:
                    continue
                hit[1].launches.append(la.model_copy(update={"path": facts.path}))
                self.stats["launches_linked"] += 1


def link(records: list[FileRecord]) -> dict[str, int]:
    return Linker(records).link()
