"""patterns.validation: the gate every rewrite passes before it merges.

`gate.validate(op, candidate)` -> EvidenceBundle; layers in correctness.py,
partition.py, static.py + integrity.py (with monitor.py), perf.py; bundle.py
writes the evidence; cli.py is `patterns validate`; gpu_evidence.py runs every
op's baseline on a GPU. What an op declares is patterns.core.opspec (OpSpec),
found through patterns.core.ops.
"""
