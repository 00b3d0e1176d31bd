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
    techniques.py technique features as data: conditions in the library's predicate language
                 (index arithmetic, launch metadata, precision, sync, CUDA features, host dispatch).
    discover.py  every technique on every kernel / CUDA function / host file -> support, contrast,
                 overlap with the library -> Draft skeletons (--drafts DIR or the user data dir).
    drafts.py    `patterns drafts list|show|promote`: a draft reaches the library only complete.
    llm.py       optional: an OpenAI-compatible model writes a draft's prose, checked.
    audit.py     random reported locations with their code, for a person to mark; --shares.
    run.py       the pipeline and its JSON report; cli.py the command; bench.py timing.

Drafts are `patterns.core.records.Draft`: a Pattern whose mechanical fields (id, title,
category, present_when = the technique's condition, applies_when, resource limits,
safety guess, evidence, tags, support and contrast) are filled and validated, and
whose prose (summary, why, transformation) is empty until a person or a checked
LLM answer writes it; `Draft.missing()` lists what still keeps it from being a Pattern.
"""
