"""The conventions of command lines people like (git, uv, gh), issue 28 item 3:

- ``ari-ledger --version`` prints ``ari-ledger X.Y.Z`` and exits 0;
- every command's ``--help`` ends with its exit codes, and every option has help text with
  its default shown;
- ``NO_COLOR`` turns colour off;
- an error echoing a huge argument prints at most ~200 characters of it and its length;
- bad selectors (a negative seq, an unknown node, an empty scope, a missing experiments
  directory) are exit 2 with one ``error:`` line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

from projections.adapters.cli import build_parser, framework, main
from support.env import subprocess_env


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args],
        capture_output=True,
        text=True,
        env=env or subprocess_env(),
        timeout=300,
    )


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return dict(sub.choices)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "run"
    done = cli("demo", str(out))
    assert done.returncode == 0, done.stderr
    return out / "checkpoint"


# --- (a) --version ---------------------------------------------------------------------------


def test_version_names_the_program_and_the_installed_version() -> None:
    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ari-ledger {importlib.metadata.version('ari-memory-ledger')}\n"
    assert re.fullmatch(r"ari-ledger \d+\.\d+\.\d+\S*\n", done.stdout)


# --- (b) exit codes in every --help ----------------------------------------------------------

# Codes beyond 0 and 2 a command documents (docs/cli.md's exit-code table and the code).
MORE_CODES = {
    "verify": {1},
    "status": {1},
    "audit": {1},
    "reads": {1},
    "prove": {1, 3},
    "redact": {1},
    "bench": {1},
    "letta": {1},
}


def exit_code_section(help_text: str) -> dict[int, str]:
    """The ``exit codes:`` section of a help text: code -> its first line."""
    assert "\nexit codes:\n" in help_text, help_text
    section = help_text.split("\nexit codes:\n", 1)[1]
    return {int(m[1]): m[2] for m in re.finditer(r"^  (\d+)  (.+)$", section, re.M)}


def test_every_command_documents_its_exit_codes() -> None:
    for name, parser in subparsers().items():
        codes = exit_code_section(parser.format_help())
        assert {0, 2} <= set(codes), (name, codes)
        assert MORE_CODES.get(name, set()) <= set(codes), (name, codes)
        assert 130 in codes, name  # Ctrl-C, as everywhere


def test_the_top_level_help_lists_the_exit_codes_too() -> None:
    codes = exit_code_section(build_parser().format_help())
    assert {0, 1, 2, 130} <= set(codes)


def test_prove_help_says_what_3_means() -> None:
    codes = exit_code_section(subparsers()["prove"].format_help())
    assert codes[3].startswith("NOTHING TO PROVE")


def test_help_as_typed_shows_the_exit_codes() -> None:
    done = cli("log", "--help")
    assert done.returncode == 0 and "\nexit codes:\n" in done.stdout


# --- (c) every option has help, its default shown --------------------------------------------


def test_no_option_lacks_help() -> None:
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in subparsers().items()
        for action in parser._actions
        if not action.help
    ]
    assert missing == []


def test_defaults_are_shown() -> None:
    parsers = subparsers()
    assert "(default: 5)" in " ".join(parsers["search"].format_help().split())
    assert "(default: report.html)" in " ".join(parsers["report"].format_help().split())
    # a flag's False and an option's None say nothing
    log_help = " ".join(parsers["log"].format_help().split())
    assert "default: None" not in log_help and "default: False" not in log_help


# --- (d) NO_COLOR ----------------------------------------------------------------------------


def test_no_color_is_honoured_at_main(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setattr(framework.console, "no_color", False)
    monkeypatch.setenv("NO_COLOR", "1")
    main(["status", str(tmp_path)])
    capsys.readouterr()
    assert framework.console.no_color is True
    assert framework.make_console(stderr=True).no_color is True
    monkeypatch.delenv("NO_COLOR")
    assert framework.make_console(stderr=True).no_color is False


def test_no_color_output_has_no_colour_codes(demo: Path) -> None:
    env = {**subprocess_env(), "FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    done = cli("verified", str(demo), env=env)
    assert done.returncode == 0, done.stderr
    assert not re.search(r"\x1b\[[0-9;]*(3[0-9]|9[0-7]|38;)", done.stdout), done.stdout[:500]


# --- (e) a long argument is cut in an error message ------------------------------------------


def test_a_huge_argument_is_cut_in_the_error_line(capsys, demo: Path) -> None:
    huge = "x" * 120_000
    code, out, err = run(capsys, "search", str(demo), "q", "--as", huge)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: --as: unknown node 'x")
    assert "… (120000 characters)" in err
    assert len(err) < 400, len(err)


def test_a_huge_experiments_path_is_cut_too(capsys, demo: Path) -> None:
    huge = "y" * 120_000
    code, out, err = run(capsys, "tree", str(demo), "--experiments", huge)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: --experiments: ")
    assert "… (120000 characters)" in err and len(err) < 400


def test_short_arguments_are_not_cut(capsys, demo: Path) -> None:
    code, _, err = run(capsys, "search", str(demo), "q", "--as", "ghost")
    assert code == 2 and err == "error: --as: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n"


# --- (f) bad selectors are exit 2, one line --------------------------------------------------

BAD = {
    "log --as-of -1": (["log", "{ckpt}", "--as-of", "-1"], "error: --as-of: must be a seq (0 or more), got -1\n"),
    "search --as-of -1": (
        ["search", "{ckpt}", "q", "--as", "root", "--as-of", "-1"],
        "error: --as-of: must be a seq (0 or more), got -1\n",
    ),
    "log --node ghost": (
        ["log", "{ckpt}", "--node", "ghost"],
        "error: --node: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n",
    ),
    "reads --node ghost": (["reads", "{ckpt}", "--node", "ghost"], "error: --node: unknown node 'ghost'"),
    "search --ancestors ''": (
        ["search", "{ckpt}", "q", "--as", "root", "--ancestors", ""],
        "error: --ancestors: names no node (give A,B,… or leave it out for the recorded lineage)\n",
    ),
    "search --ancestors ,": (
        ["search", "{ckpt}", "q", "--as", "root", "--ancestors", ","],
        "error: --ancestors: names no node (give A,B,… or leave it out for the recorded lineage)\n",
    ),
    "tree --experiments missing/": (
        ["tree", "{ckpt}", "--experiments", "missing/"],
        "error: --experiments: 'missing/' is not a directory\n",
    ),
    "report --experiments missing/": (
        ["report", "{ckpt}", "-o", "{ckpt}/../r.html", "--experiments", "missing/"],
        "error: --experiments: 'missing/' is not a directory\n",
    ),
    # the rest of issue 28's list, and --experiments / --as-of wherever they exist
    "search --kind nonsense": (
        ["search", "{ckpt}", "q", "--as", "root", "--kind", "nonsense"],
        "error: --kind: unknown kind 'nonsense': not one of observation, experiment_result,",
    ),
    "verified --as ghost": (
        ["verified", "{ckpt}", "--as", "ghost"],
        "error: --as: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n",
    ),
    "context --as ghost": (
        ["context", "{ckpt}", "--as", "ghost"],
        "error: --as: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n",
    ),
    "context without --as": (
        ["context", "{ckpt}"],
        "error: --as: missing: name the node to read as (see `ari-ledger tree`)\n",
    ),
    "search without --as or --ancestors": (
        ["search", "{ckpt}", "q"],
        "error: --as: missing: name the node to read as (see `ari-ledger tree`), or give --ancestors A,B,…\n",
    ),
    "redact --node ghost": (
        ["redact", "{ckpt}", "--node", "ghost", "--reason", "typo"],
        "error: --node: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n",
    ),
    "redact --node ghost --dry-run": (
        ["redact", "{ckpt}", "--node", "ghost", "--reason", "typo", "--dry-run"],
        "error: --node: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n",
    ),
    "audit --run-id typo": (
        ["audit", "{ckpt}", "--run-id", "typo"],
        "error: --run-id: no run 'typo': no directory ",
    ),
    "audit --experiments missing/": (
        ["audit", "{ckpt}", "--experiments", "missing/"],
        "error: --experiments: 'missing/' is not a directory\n",
    ),
    "prove --experiments missing/": (
        ["prove", "{ckpt}", "--experiments", "missing/"],
        "error: --experiments: 'missing/' is not a directory\n",
    ),
    "rebuild --experiments missing/": (
        ["rebuild", "{ckpt}", "--experiments", "missing/"],
        "error: --experiments: 'missing/' is not a directory\n",
    ),
    "log --as-of past the end": (
        ["log", "{ckpt}", "--as-of", "99999"],
        "error: --as-of: seq 99999 is beyond the log's last seq ",
    ),
    "search --as-of past the end": (
        ["search", "{ckpt}", "q", "--as", "root", "--as-of", "99999"],
        "error: --as-of: seq 99999 is beyond the log's last seq ",
    ),
    "context --as-of past the end": (
        ["context", "{ckpt}", "--as", "root", "--as-of", "99999"],
        "error: --as-of: seq 99999 is beyond the log's last seq ",
    ),
    "verified --as-of past the end": (
        ["verified", "{ckpt}", "--as-of", "99999"],
        "error: --as-of: seq 99999 is beyond the log's last seq ",
    ),
    "verified --as-of -1": (
        ["verified", "{ckpt}", "--as-of", "-1"],
        "error: --as-of: must be a seq (0 or more), got -1\n",
    ),
    "export without -o": (["export", "{ckpt}"], "error: --output: missing: name the bundle file to write (-o FILE)\n"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_selector_is_one_error_line(case: str, capsys, demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args, expected = BAD[case]
    monkeypatch.chdir(demo.parent)
    code, out, err = run(capsys, *(a.replace("{ckpt}", str(demo)) for a in args))
    assert (code, out) == (2, ""), (case, err)
    assert err.count("\n") == 1 and err.startswith(expected), (case, err)
    assert not (demo.parent / "r.html").exists()


def test_good_selectors_still_work(capsys, demo: Path) -> None:
    code, out, _ = run(capsys, "log", str(demo), "--node", "node_A", "--as-of", "0")
    assert code == 0
    code, out, _ = run(capsys, "log", str(demo), "--node", "node_A")
    assert code == 0 and '"node_A"' in out
    code, out, _ = run(capsys, "tree", str(demo), "--experiments", str(demo.parent / "experiments"))
    assert code == 0 and "node_A" in out
    code, _, _ = run(capsys, "search", str(demo), "q", "--as", "node_A", "--ancestors", "root,node_A")
    assert code == 0
