"""Progress on stderr for what can take more than a second or two, and what Ctrl-C kept.

Library functions take an optional ``progress(done, total)`` and never print; a command passes
a :class:`Reporter`. While stderr is a terminal and the command was not given ``--json``, a
reporter draws a rich bar on stderr (``NO_COLOR`` honoured, through ``framework.make_console``)
for work still running after :data:`SHOW_AFTER_S`, redrawn at most every :data:`REDRAW_S`, and
gone (transient) when the work ends; otherwise it draws nothing at all, and stdout carries only
the result either way. The bars of one command share one live display (rich draws one at a
time); :func:`running` (in ``main``) removes it before anything else is printed.

Ctrl-C is exit 130 with one line, ``interrupted: <what was kept>``: the message of a
:class:`~ledger.progress.Interrupted` the work raised, else the ``note`` of the reporter whose
work was running. Inside :func:`safe_points` Ctrl-C does not stop the work where it is but at
its next progress call, which a library makes between two finished steps (a batch written and
synced, a chunk folded), so what was done is whole and can be saved; a second Ctrl-C stops at
once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from ledger.progress import Interrupted
from projections.adapters.cli.framework import make_console

if TYPE_CHECKING:  # rich loads with the first bar drawn, not with every command
    from rich.progress import Progress, TaskID

REDRAW_S = 0.1  # at most ~10 redraws a second (an import of 50,000 entries spends 0.5% of its CPU on its bar)

SHOW_AFTER_S = 0.5  # work done sooner draws no bar (no flash for a quick command)

Note = Callable[[int, int], str]  # (done, total) -> what was kept, when Ctrl-C stopped the work


def wanted(json: bool = False, stream: IO[str] | None = None) -> bool:
    """Whether bars are drawn: on a terminal (stderr by default), never with ``--json``."""
    if json:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or closed
        return False


class _Command:
    """The running command: whether it draws bars, its one live display, its reporters."""

    def __init__(self, show: bool = False) -> None:
        self.show = show
        self.bars: Progress | None = None
        self.reporters: list[Reporter] = []
        self.stop_requested = False  # Ctrl-C inside safe_points(), not acted on yet

    def bar(self, reporter: Reporter) -> TaskID:
        if self.bars is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=make_console(stderr=True),
                transient=True,
                # Drawn when the work reports (at most every REDRAW_S); a thread redraws on its own
                # (a ticking clock, 4 times a second) only for steps that take minutes (letta up).
                auto_refresh=bool(reporter.steps),
                refresh_per_second=4,
                redirect_stdout=False,  # the result goes to stdout as it is, never through the bar
                redirect_stderr=False,
            )
            self.bars.start()
        return self.bars.add_task(reporter.description(), total=reporter.total, count="")

    def drop(self, task: TaskID) -> None:
        if self.bars is None:
            return
        self.bars.remove_task(task)
        if not self.bars.tasks:
            self.close()

    def close(self) -> None:
        if self.bars is not None:
            bars, self.bars = self.bars, None
            bars.stop()


_command = _Command()


class Reporter:
    """``progress(done, total)`` for one kind of work: a bar while it runs (when bars are drawn),
    and its ``note`` when Ctrl-C stops it. Each call records how far the work is; a call with
    ``done >= total`` ends the run (its bar goes), a later one starts the next run."""

    def __init__(self, what: str, unit: str = "events", *, note: Note | None = None, steps: Sequence[str] = ()) -> None:
        self.what, self.unit, self.note, self.steps = what, unit, note, tuple(steps)
        self.done = self.total = 0
        self.running = False
        self._began: float | None = None
        self._drawn = 0.0
        self._task: TaskID | None = None
        _command.reporters.append(self)

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total, self.running = done, total, done < total
        if _command.stop_requested and threading.current_thread() is threading.main_thread():
            _command.stop_requested = False  # Ctrl-C under safe_points(): the work stops here,
            raise KeyboardInterrupt  # between two of its steps
        if not _command.show:
            return
        if not self.running:
            self._end()
            return
        now = time.monotonic()
        if self._began is None:
            self._began = now
        if now - self._drawn < REDRAW_S or now - self._began < SHOW_AFTER_S:
            return
        self._drawn = now
        if self._task is None:
            self._task = _command.bar(self)
        bars = _command.bars
        if bars is not None:
            bars.update(self._task, description=self.description(), completed=done, total=total, count=self.count())
            if not bars.live.auto_refresh:
                bars.refresh()

    def description(self) -> str:
        if self.steps and self.done < len(self.steps):
            return f"{self.what}: {self.steps[self.done]}"
        return self.what

    def count(self) -> str:
        return f"{self.done:,}/{self.total:,} {self.unit}"

    def kept(self) -> str | None:
        """What the note says was kept, for the work as far as it got."""
        return self.note(self.done, self.total) if self.note is not None else None

    def _end(self) -> None:
        self._began = None
        if self._task is not None:
            task, self._task = self._task, None
            _command.drop(task)


@contextmanager
def running(args: argparse.Namespace) -> Iterator[None]:
    """Run one command: bars when stderr is a terminal and it was not given ``--json``, every
    bar gone when it ends (before ``main`` prints an error or what Ctrl-C kept)."""
    global _command
    _command = _Command(wanted(bool(getattr(args, "json", False))))
    try:
        yield
    finally:
        _command.close()


def interrupted(exc: KeyboardInterrupt) -> str:
    """The one line Ctrl-C prints: what the interrupted work kept, when it is known (also when
    a second Ctrl-C cut short what followed the first, e.g. a snapshot save at close)."""
    said: BaseException | None = exc
    while said is not None:
        if isinstance(said, Interrupted):
            return f"interrupted: {said.message}"
        said = said.__context__

    for reporter in reversed(_command.reporters):
        if reporter.running and (kept := reporter.kept()):
            return f"interrupted: {kept}"
    return "interrupted"


@contextmanager
def safe_points() -> Iterator[None]:
    """Inside, Ctrl-C stops the work at its next progress call (between two finished steps),
    not in the middle of one; a second Ctrl-C stops at once. Work that makes no progress call
    after the Ctrl-C (its last steps) finishes, and its result stands."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: Any = signal.getsignal(signal.SIGINT)
    if previous is None:  # installed outside Python: restore Python's own
        previous = signal.default_int_handler

    def stop_at_next_step(signum: int, frame: object) -> None:
        _command.stop_requested = True
        signal.signal(signal.SIGINT, previous)  # the next Ctrl-C: at once

    signal.signal(signal.SIGINT, stop_at_next_step)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _command.stop_requested = False


def folding(checkpoint: object) -> Reporter:
    """The reporter of a reading command's folds of the log (the first one of a large log
    without a snapshot takes seconds): nothing is lost when it is stopped."""

    def note(done: int, total: int) -> str:
        return (
            f"folded {done:,} of {total:,} events when stopped; nothing is lost: the log is the truth "
            f"and this command writes nothing (`ari-ledger rebuild {checkpoint}` folds it once and keeps it)"
        )

    return Reporter("folding the log", note=note)


def only_reading(what: str, command: str) -> Reporter:
    """The reporter of a command that only reads (``verify``, ``prove``): nothing to keep."""

    def note(done: int, total: int) -> str:
        return f"{command} only reads: nothing changed ({done:,} of {total:,} events checked when stopped)"

    return Reporter(what, note=note)
