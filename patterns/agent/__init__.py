"""patterns.agent: the loop from a kernel's bottleneck to a reviewed, merged rewrite.

`loop.py` runs the agent (analyse, retrieve, rewrite, validate, decide);
`hypothesis.py` words a hypothesis from the estimate's numbers; `journal.py`
is the append-only record a run resumes from; `review.py` stores review items
and accepts or rejects them; `cli.py` holds the `agent`, `review` and
`serving` commands.
"""
