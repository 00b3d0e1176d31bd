"""Load native libraries with ctypes.CDLL instead of ctypes.PyDLL, so their calls run without the GIL.

Every `ctypes.PyDLL(...)` becomes `ctypes.CDLL(...)` and every
`ctypes.pydll.LoadLibrary(...)` becomes `ctypes.cdll.LoadLibrary(...)`, through
whatever name the file imported them by (`import ctypes as ct`,
`from ctypes import PyDLL`); a from-import gains CDLL (and loses PyDLL once
unused). A CDLL function releases the GIL for the duration of the call, so a
thread of the same process (a KV transfer) runs while this one waits.

Refuses what must keep the GIL: ctypes.pythonapi calls, functions that take or
return Python objects (ctypes.py_object, PYFUNCTYPE callbacks), and Python C API
functions (Py*, _Py*) called through a PyDLL handle.
"""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from patterns.rewriter.edits import PlannedCodemod, code

SWAP = {"ctypes.PyDLL": "ctypes.CDLL", "ctypes.pydll.LoadLibrary": "ctypes.cdll.LoadLibrary"}


class ReleaseGilNativeWait(PlannedCodemod):
    PATTERN = "release_gil_native_wait"
    DESCRIPTION = "ctypes.PyDLL handles become ctypes.CDLL: native waits release the GIL"
    SCOPE = "file"  # host code: the file may have no kernel

    def _qualify(self, node: cst.BaseExpression) -> str:
        """Dotted name through the file's imports: `ct.PyDLL` and `PyDLL` -> ctypes.PyDLL."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.insert(0, node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return ""
        head = self.facts.imports.get(node.value, node.value)
        return ".".join([head, *parts])

    def plan(self, node: cst.Module) -> None:
        calls = [c for c in [*self.facts.module_calls, *self.facts.host_calls] if c.name in SWAP]
        if not calls:
            self.refuse("no ctypes.PyDLL or ctypes.pydll.LoadLibrary handle in the file: a pybind11 or C-extension binding "
                        "releases the GIL in C++ (py::call_guard<py::gil_scoped_release>, Py_BEGIN_ALLOW_THREADS)")
        # what must keep the GIL
        for n in m.findall(node, m.Attribute() | m.Name()):
            name = self._qualify(n)  # type: ignore[arg-type]
            if name.startswith("ctypes.pythonapi"):
                self.refuse(f"line {self.line(n)}: ctypes.pythonapi calls the Python C API, which needs the GIL: keep PyDLL")
            if name in ("ctypes.py_object", "ctypes.PYFUNCTYPE"):
                self.refuse(f"line {self.line(n)}: {name}: a function that takes or returns Python objects needs the GIL; "
                            "keep PyDLL for it (or load it through a second, PyDLL handle)")
        handles = self._handles(node)
        for attr in m.findall(node, m.Attribute(attr=m.Name())):
            base = code(attr.value)  # type: ignore[attr-defined]
            fname = attr.attr.value  # type: ignore[attr-defined]
            if base in handles and fname.startswith(("Py", "_Py")):
                self.refuse(f"line {self.line(attr)}: {base}.{fname} is a Python C API function: it needs the GIL; keep PyDLL")

    def _handles(self, node: cst.Module) -> set[str]:
        """Names (`_native`, `self._lib`) bound to a PyDLL handle."""
        out = set()
        for a in m.findall(node, m.Assign(value=m.Call())):
            if self._qualify(a.value.func) in SWAP:  # type: ignore[attr-defined]
                out |= {code(t.target) for t in a.targets}  # type: ignore[attr-defined]
        return out

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        name = self._qualify(original.func)
        if name not in SWAP:
            return updated
        func = updated.func
        if isinstance(func, cst.Name):  # from ctypes import PyDLL
            AddImportsVisitor.add_needed_import(self.context, "ctypes", "CDLL")
            RemoveImportsVisitor.remove_unused_import(self.context, "ctypes", "PyDLL")
            return updated.with_changes(func=func.with_changes(value="CDLL"))
        if name == "ctypes.PyDLL":
            return updated.with_changes(func=func.with_changes(attr=cst.Name("CDLL")))  # type: ignore[union-attr]
        inner = func.value  # type: ignore[union-attr]  # <ctypes>.pydll
        if isinstance(inner, cst.Name):  # from ctypes import pydll
            AddImportsVisitor.add_needed_import(self.context, "ctypes", "cdll")
            RemoveImportsVisitor.remove_unused_import(self.context, "ctypes", "pydll")
            return updated.with_changes(func=func.with_changes(value=inner.with_changes(value="cdll")))  # type: ignore[union-attr]
        return updated.with_changes(func=func.with_changes(value=inner.with_changes(attr=cst.Name("cdll"))))  # type: ignore[union-attr]
