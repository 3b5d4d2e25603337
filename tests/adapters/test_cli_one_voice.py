"""Every command answers bad input in one voice (issue 41): each class of bad input (missing,
unknown name, wrong type, out of range, huge, not UTF-8) given to every command of the parser
is exit 2 with exactly one ``error:`` line on stderr, nothing on stdout, no traceback, no usage
block, no value echoed whole, and the checkpoint it names is left byte for byte as it was (nor is anything made where it runs).

The cases are drawn from the parser itself (every command, every option that takes a number,
every positional), so a new command or option is covered without editing this file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from projections.adapters.cli import build_parser, main
from support.env import subprocess_env

HUGE = "x" * 100_000
NOT_UTF8 = os.fsdecode(b"node_\xff\xfe")  # what a shell passes for bytes that are not UTF-8
# Commands that serve or run others until stopped: only their parse errors are tried here.
SERVES = {"mcp", "embed-server", "letta", "bench"}


def subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return dict(sub.choices)


def positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The positionals a person gives (not an optional old spelling, not what a command passes on)."""
    found = [a for a in parser._actions if not a.option_strings and a.nargs != argparse.REMAINDER]
    return found[:1] + [a for a in found[1:] if a.nargs is None]


def number_options(parser: argparse.ArgumentParser) -> list[str]:
    """The long option of every option whose value is converted (a number, a port, seconds)."""
    return [
        next(s for s in a.option_strings if s.startswith("--"))
        for a in parser._actions
        if a.option_strings and a.type not in (None, str, Path) and a.help != argparse.SUPPRESS
    ]


def cases(checkpoint: str) -> list[tuple[str, str, list[str]]]:
    """(command, class of bad input, argv) for every command the parser has."""
    out: list[tuple[str, str, list[str]]] = []
    for name, parser in subparsers().items():
        args = positionals(parser)
        given = [checkpoint if a.dest == "checkpoint" else str(next(iter(a.choices or ["query"]))) for a in args]
        if args and args[0].nargs not in ("?", "*"):
            out.append((name, "missing", [name]))
        if args and args[0].choices is None and name not in SERVES:
            out.append((name, "huge", [name, HUGE, *given[1:]]))
            out.append((name, "not UTF-8", [name, NOT_UTF8, *given[1:]]))
        if args and args[0].choices is not None:
            out.append((name, "unknown name", [name, "no-such-choice"]))
        prefix = [name, *given]
        out.append((name, "unknown name", [*prefix, "--no-such-option"]))
        for option in number_options(parser):
            out.append((name, "wrong type", [*prefix, option, "many"]))
            out.append((name, "huge", [*prefix, option, "9" * 5000]))
            if name not in SERVES:  # a server's own ranges are its business: it would start
                out.append((name, "out of range", [*prefix, option, "-1"]))
    return out


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("voice") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "projections", "demo", str(out)], capture_output=True, env=subprocess_env(), timeout=600
    )
    assert done.returncode == 0, done.stderr
    return out / "checkpoint"


def answer(capfd: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors end the process as the command would
        code = int(exc.code or 0)
    out, err = capfd.readouterr()
    return code, out, err


def test_every_command_answers_every_class_of_bad_input_in_one_line(capfd, demo: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path a command writes would land here
    before = tree_hash(demo.parent)
    tried = cases(str(demo))
    assert len({c for c, _, _ in tried}) == len(subparsers())  # every command is tried
    bad = []
    for name, kind, argv in tried:
        code, out, err = answer(capfd, argv)
        lines = err.splitlines()
        problems = [
            why
            for why, failed in [
                (f"exit {code}", code != 2),
                (f"{len(lines)} lines on stderr", len(lines) != 1),
                ("no error: prefix", not err.startswith("error: ")),
                ("stdout not empty", out not in ("", f"== {argv[1]}\n" if name == "bench" else "")),
                ("a traceback", "Traceback" in err),
                ("a usage block", "usage:" in err),
                ("a value echoed whole", len(err) > 1_000),
                ("a surrogate shown", "\\udc" in err or any("\udc80" <= ch <= "\udcff" for ch in err)),
            ]
            if failed
        ]
        if problems:
            bad.append(f"{' '.join(a[:40] for a in argv)} [{kind}]: {', '.join(problems)}: {err[:300]!r}")
    assert not bad, "\n".join(bad)
    assert tree_hash(demo.parent) == before  # no bad input wrote anything
    assert list(tmp_path.iterdir()) == []  # nor anywhere else (a skill directory named by a bad path)


def test_the_same_bad_value_gets_the_library_reason_under_the_option_typed(capfd, demo: Path) -> None:
    from projections.api import MemoryBackend

    with pytest.raises(Exception) as raised:
        MemoryBackend(demo).search_memory("q", ["root"], limit=-1)
    code, _, err = answer(capfd, ["search", str(demo), "q", "--as", "root", "--limit", "-1"])
    assert code == 2
    assert err == f"error: --limit: {raised.value.reason}\n"  # type: ignore[attr-defined]


def test_a_near_command_is_suggested_and_no_usage_block_is_printed(capfd) -> None:
    code, out, err = answer(capfd, ["lgo"])
    assert code == 2 and out == ""
    assert err == "error: COMMAND: unknown command 'lgo'; did you mean 'log'?; `ari-ledger --help` lists the commands\n"
    code, _, err = answer(capfd, [])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: COMMAND: missing")


def test_an_argument_too_long_for_int_is_cut_in_its_echo(capfd) -> None:
    code, _, err = answer(capfd, ["log", "/nowhere", "--as-of", "9" * 5000])
    assert code == 2 and err.count("\n") == 1
    assert "(5000 characters)" in err and len(err) < 400


def test_a_checkpoint_copied_to_a_path_that_is_not_utf8_still_reads(capfd, demo: Path, tmp_path: Path) -> None:
    """``cp -r`` can put a checkpoint anywhere: its reading commands still answer (the Letta
    namespace hashes the path's bytes), and a path is shown with ``\\xff``, not a surrogate."""
    import shutil

    copy = tmp_path / NOT_UTF8
    shutil.copytree(demo, copy)
    for argv in (["status"], ["verify"], ["tree"], ["log"], ["search", "q", "--as", "root"]):
        code, out, err = answer(capfd, [argv[0], str(copy), *argv[1:]])
        assert code == 0 and err == "", (argv, err)
    code, out, _ = answer(capfd, ["status", str(copy)])
    assert "node_\\xff\\xfe" in out and "\ufffd" not in out
