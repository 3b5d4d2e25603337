"""What ``ari-ledger`` loads before it runs a command: each command imports what it needs when
it runs, so the start of every command (``verify`` is benchmarked against a raw gunzip of the
log) pays for none of the others.

rich (tables, bars: ~50 ms), ``importlib.metadata`` (``--version`` only: ~30 ms and the look-up
as much again), the bundle's tar and codecs (``export``, ``import``, ``-o`` checks) and
``projections.tools.checkpoint`` with the projection engines under it (``verify``, ``status``,
``repair``, ``redact``) load when a command asks for them, never with the command line itself
nor with its parser, which sets up every command's arguments. Each case runs in a fresh
interpreter, the way a console script starts.
"""

from __future__ import annotations

from support.imports import loaded_after as loaded_in_fresh

HEAVY = (
    "rich",
    "importlib.metadata",
    "ledger.maintenance.bundle",
    "projections.tools.checkpoint",
    "numpy",
    "projections.api.backend",
    "projections.api.session",
    "projections.engines.local",
)


def loaded_after(script: str) -> dict[str, bool]:
    """Which of HEAVY a fresh interpreter holds after importing the command line and running ``script``."""
    return loaded_in_fresh("import projections.adapters.cli", script, HEAVY)


def test_the_command_line_starts_without_what_its_commands_run() -> None:
    assert loaded_after("") == dict.fromkeys(HEAVY, False)


def test_building_the_parser_sets_up_every_command_without_them() -> None:
    """``--help`` and argument parsing list and set up every command: their help texts, choices
    and exit codes need none of HEAVY."""
    loaded = loaded_after(
        """
        from projections.adapters.cli import build_parser
        from projections.adapters.cli.framework import COMMANDS
        sub = next(a for a in build_parser()._actions if a.dest == "command")
        assert list(sub.choices) == list(COMMANDS) and "verify" in COMMANDS
        """
    )
    assert loaded == dict.fromkeys(HEAVY, False)


def test_version_loads_the_package_metadata_when_asked() -> None:
    """The other side: ``--version`` still looks the version up, when it is given."""
    loaded = loaded_after(
        """
        import contextlib, io
        from projections.adapters.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main(["--version"])
        assert out.getvalue().startswith("ari-ledger "), out.getvalue()
        """
    )
    assert loaded["importlib.metadata"]
