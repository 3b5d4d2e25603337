"""How long work tells its caller how far it is, and what an interrupt kept.

The write side cannot import the read side, so it names its own alias of the read side's
``projections.engines.protocol.Progress``: a function that takes an optional ``progress`` calls
it as ``progress(done, total)`` (in the units the function names: events, entries, steps) after
each step it finished — a member checked, a batch written — and never prints. The caller
decides what to show (``ari-ledger`` draws a bar on a terminal, nothing otherwise).

:class:`Interrupted` is a ``KeyboardInterrupt`` raised where the work stopped, carrying one line
for people on what was kept; ``ari-ledger`` prints ``interrupted: <message>`` and exits 130.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int], None]  # (done so far, total), after each finished step


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the interrupted work kept (``message``: one line, no ``interrupted:``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
