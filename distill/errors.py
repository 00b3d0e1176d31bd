"""The distiller's one user-facing error: one line, exit 2 (patterns.cli)."""


class DistillError(ValueError):
    """A source cannot be resolved or downloaded, a library write is refused, ... Message is one line."""
