"""patterns.kernels: the project's own Triton kernels, each beside its plain PyTorch reference.

One folder per op: `naive.py` (reference), `baseline.py` (the Triton kernel and
its launcher), `spec.py` (`SPEC`, what the validation gate reads), for an op
timed on a GPU `benchmark.py` (`BENCHMARK`, what `python -m patterns.benchmark`
times), and `README.md` (the maths, the traffic and FLOP model, what is left to
improve). The op list is the folders with a spec.py: patterns.core.ops finds
and loads them. Op modules are imported on demand: importing this package
loads no kernel.
"""
