"""patterns.distill: upstream kernel code -> evidence for the library, and draft skeletons.

    patterns distill fla-core==0.6.0 sglang==0.5.23 sgl-deep-gemm==0.2.5 [--write]

Pipeline (one module per step):

    sources.py   SOURCE -> files: a folder, a wheel/sdist, an installed package, or a
                 PyPI requirement fetched with `pip download --no-deps` into the user
                 cache and read straight from the archive (never installed).
    scan.py      files -> FileRecord per file (ignored / skipped with a reason / facts),
                 cached by sha256 (cache.py), extracted in one process pool shared by
                 all sources.
    pyfacts.py   Python: one stdlib parse per file; the foundation's extractor
                 (patterns.core.facts) on the kernel part, host functions read into the
                 same FileFacts fields by a lighter reader.
    native.py    CUDA/C++: tree-sitter (CUDA grammar) -> NativeFileFacts: TMA copies
                 and descriptors, mbarriers, wgmma/UMMA/MMA, register reallocation,
                 persistent loops, FP8 scale promotion, specialisations, pybind11
                 bindings with or without a GIL release. Rules are a table.
    link.py      cross-file facts: imported @triton.jit helpers inlined, module aliases
                 resolved, launches in other files attached, descriptor parameters.
    detect.py    every library pattern's present_when over all facts -> locations.
    merge.py     --write: evidence.upstream spliced into pattern.yaml (diff first).
    discover.py  unmatched recurring facts -> Draft skeletons (drafts/<id>/pattern.yaml).
    llm.py       optional: an OpenAI-compatible model writes a draft's prose, checked.
    run.py       the pipeline and its JSON report; cli.py the command; bench.py timing.

Drafts are `patterns.core.records.Draft`: a Pattern whose mechanical fields (id, title,
category guess, present_when = the cluster's signature as predicates, evidence,
tags) are filled and validated, and whose prose fields may be empty until a
person (or a checked LLM answer) writes them; `Draft.missing()` lists what still
keeps it from validating as a Pattern.
"""
