"""One name for each idea, ``--json`` wherever a result is printed, readable output and damaged
JSON named by its path (issue 28 item 3, b-d).

- ``-o/--output FILE`` is the file a command writes; ``--as NODE`` reads as a node (its
  lineage); ``--node NODE`` keeps a node's own records; ``--as-of SEQ`` and ``--experiments DIR``
  mean the same everywhere. Each has its help text from one place in ``framework.py``.
- The old spellings (``export CKPT OUT``, ``prove --html``, ``--node`` for ``--as``) still
  work, hidden from ``--help``, with one ``note:`` line on stderr, and give the same result.
- ``report``, ``export``, ``import``, ``ari-skill`` and ``bench`` print JSON with ``--json``.
- ``status`` and ``audit`` print words, not Python dicts; the demo cuts a hit after a word.
- A damaged ``verified_context.json`` or bundle manifest is one error line naming the file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ledger import InvalidInput
from ledger.safe_io import read_json
from projections.adapters.cli import build_parser, main
from projections.adapters.cli.checkpoint import status_lines
from projections.adapters.cli.framework import (
    AS_HELP,
    AS_OF_HELP,
    EXPERIMENTS_HELP,
    NODE_HELP,
    clip,
    counts,
)
from support.env import ROOT, subprocess_env


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "projections", *args], capture_output=True, text=True, env=subprocess_env(), timeout=300
    )


def run(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return dict(sub.choices)


def visible(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each option string ``--help`` shows, and its action."""
    return {o: a for a in parser._actions if a.help != argparse.SUPPRESS for o in a.option_strings}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("names") / "run"
    done = cli("demo", str(out))
    assert done.returncode == 0, done.stderr
    return out


# --- one name, one help text ---------------------------------------------------------------

WRITERS = {"report", "export", "export-ari", "prove"}  # commands that write a file the user names


def test_every_file_a_command_writes_is_dash_o_output() -> None:
    for name, parser in subparsers().items():
        options = visible(parser)
        assert "--html" not in options and "--out" not in options, name
        if name in WRITERS:
            assert options["-o"] is options["--output"] and options["-o"].metavar == "FILE", name
        else:
            assert "-o" not in options, name


def test_node_options_have_one_meaning_each_from_one_place() -> None:
    parsers = subparsers()
    for name in ("search", "context", "verified"):
        options = visible(parsers[name])
        assert options["--as"].help.startswith(AS_HELP), name
        assert "--node" not in options, name  # the old spelling, hidden
    for name in ("log", "reads", "redact"):
        options = visible(parsers[name])
        assert options["--node"].help == NODE_HELP and "--as" not in options, name
    node_options = {n for n, p in parsers.items() if "--node" in visible(p)}
    assert node_options == {"log", "reads", "redact"}


def test_as_of_and_experiments_read_the_same_everywhere() -> None:
    parsers = subparsers()
    as_of = {n for n, p in parsers.items() if "--as-of" in visible(p)}
    # every reading command of memory travels in time (tests/adapters/test_cli_as_of.py)
    assert as_of == {"log", "search", "context", "verified", "tree", "report", "audit", "prove", "reads"}
    assert all(visible(parsers[n])["--as-of"].help == AS_OF_HELP for n in as_of)
    experiments = {n for n, p in parsers.items() if "--experiments" in visible(p)}
    assert experiments == {"audit", "tree", "report", "prove", "rebuild"}
    assert all(visible(parsers[n])["--experiments"].help == EXPERIMENTS_HELP for n in experiments)


def test_hidden_old_spellings_are_not_in_help() -> None:
    parsers = subparsers()
    assert "--html" not in parsers["prove"].format_help()
    for name in ("search", "context", "verified"):
        assert "--node" not in parsers[name].format_help(), name
    usage = parsers["export"].format_usage()
    assert "-o FILE" in usage and " out" not in usage.lower().replace("--output", "")


# --- old spellings still work, with one note ----------------------------------------------


@pytest.mark.parametrize(
    "old,new",
    [
        (
            ["search", "{ckpt}", "blocking", "--node", "node_A2", "--json"],
            ["search", "{ckpt}", "blocking", "--as", "node_A2", "--json"],
        ),
        (["context", "{ckpt}", "--node", "node_A21", "--json"], ["context", "{ckpt}", "--as", "node_A21", "--json"]),
        (["verified", "{ckpt}", "--node", "node_A12", "--json"], ["verified", "{ckpt}", "--as", "node_A12", "--json"]),
    ],
    ids=["search", "context", "verified"],
)
def test_node_for_as_still_works_with_one_note(capsys, demo: Path, old: list[str], new: list[str]) -> None:
    ckpt = str(demo / "checkpoint")
    code_new, out_new, err_new = run(capsys, *(a.replace("{ckpt}", ckpt) for a in new))
    code_old, out_old, err_old = run(capsys, *(a.replace("{ckpt}", ckpt) for a in old))
    assert code_new == code_old == 0 and err_new == ""
    assert err_old == "note: --node is deprecated; use --as (it means the same)\n"
    strip = lambda out: {k: v for k, v in json.loads(out).items() if k not in ("as_of_seq", "anchor")}  # noqa: E731
    assert strip(out_old) == strip(out_new)


def test_export_positional_and_prove_html_still_work_with_one_note(capsys, demo: Path, tmp_path: Path) -> None:
    ckpt = str(demo / "checkpoint")
    code, out, err = run(capsys, "export", ckpt, str(tmp_path / "old.tar"))
    assert code == 0 and err == "note: `export CKPT OUT` is deprecated; use `export CKPT -o OUT` (it means the same)\n"
    code, out, err = run(capsys, "export", ckpt, "-o", str(tmp_path / "new.tar"))
    assert code == 0 and err == "" and out == f"exported 38 events to {tmp_path / 'new.tar'}\n"
    assert (tmp_path / "old.tar").read_bytes() == (tmp_path / "new.tar").read_bytes()
    code, out, err = run(capsys, "export", ckpt, str(tmp_path / "b.tar"), "-o", str(tmp_path / "a.tar"))
    assert code == 2 and err.startswith("error: --output: give the bundle file once: ") and err.count("\n") == 1
    assert not (tmp_path / "a.tar").exists() and not (tmp_path / "b.tar").exists()

    code_old, out_old, err_old = run(capsys, "prove", ckpt, "--html", str(tmp_path / "old.html"))
    code_new, out_new, err_new = run(capsys, "prove", ckpt, "-o", str(tmp_path / "new.html"))
    assert code_old == code_new and err_new == ""
    assert err_old == "note: --html is deprecated; use -o/--output (it means the same)\n"
    assert out_old.splitlines()[-1].endswith(f"; report: {tmp_path / 'old.html'}")
    assert out_new.splitlines()[-1].endswith(f"; report: {tmp_path / 'new.html'}")
    assert "<svg" in (tmp_path / "old.html").read_text() and "<svg" in (tmp_path / "new.html").read_text()


def test_redact_of_an_unknown_node_changes_nothing(capsys, demo: Path) -> None:
    ckpt = demo / "checkpoint"
    before = {p: p.read_bytes() for p in ckpt.rglob("*") if p.is_file()}
    code, out, err = run(capsys, "redact", str(ckpt), "--node", "ghost", "--reason", "typo")
    assert (code, out) == (
        2,
        "",
    ) and err == "error: --node: unknown node 'ghost' in this checkpoint (see `ari-ledger tree`)\n"
    assert {p: p.read_bytes() for p in ckpt.rglob("*") if p.is_file()} == before


def test_as_of_within_the_log_works_where_it_was_added(capsys, demo: Path) -> None:
    ckpt = str(demo / "checkpoint")
    last = json.loads(run(capsys, "status", ckpt, "--json")[1])["last_seq"]
    code, out, _ = run(capsys, "log", ckpt, "--as-of", str(last))
    assert code == 0 and len(out.splitlines()) == last
    # as of seq 1 (only the experiment's seed) node_A21 has no ancestor result yet; at the end it has three
    early = json.loads(run(capsys, "context", ckpt, "--as", "node_A21", "--as-of", "1", "--json")[1])
    late = json.loads(run(capsys, "context", ckpt, "--as", "node_A21", "--as-of", str(last), "--json")[1])
    assert early["ancestor_summaries"] == [] and len(late["ancestor_summaries"]) == 3
    early = json.loads(run(capsys, "verified", ckpt, "--as", "node_A2", "--as-of", "1", "--json")[1])
    late = json.loads(run(capsys, "verified", ckpt, "--as", "node_A2", "--as-of", str(last), "--json")[1])
    assert early["claims"] == [] and late["claims"]


# --- --json ---------------------------------------------------------------------------------

NO_JSON = {"mcp", "embed-server", "log", "completion"}  # servers; log prints JSON lines; a script


def test_every_command_that_prints_a_result_has_json() -> None:
    for name, parser in subparsers().items():
        assert ("--json" in visible(parser)) != (name in NO_JSON), name


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_report_export_import_and_ari_skill_say_what_they_wrote(capsys, demo: Path, tmp_path: Path) -> None:
    ckpt = str(demo / "checkpoint")
    code, out, err = run(capsys, "report", ckpt, "-o", str(tmp_path / "r.html"), "--json")
    report = json.loads(out)
    assert code == 0 and err == ""
    assert report["path"] == str(tmp_path / "r.html") and report["nodes"] == 9 and report["as_of_seq"] == 38
    assert report["sha256"] == sha256(tmp_path / "r.html") and report["bytes"] == (tmp_path / "r.html").stat().st_size
    assert report["experiments"] == str(demo / "experiments")

    code, out, _ = run(capsys, "export", ckpt, "-o", str(tmp_path / "b.tar"), "--json")
    exported = json.loads(out)
    assert code == 0 and exported["path"] == str(tmp_path / "b.tar") and exported["manifest"]["events"] == 38
    log = demo / "checkpoint" / "memory_ledger" / "memory_ledger.jsonl.gz"
    assert exported["manifest"]["log_sha256"] == sha256(log)

    code, out, _ = run(capsys, "import", str(tmp_path / "b.tar"), str(tmp_path / "copy"), "--json")
    imported = json.loads(out)
    assert code == 0 and imported["manifest"] == exported["manifest"] and imported["snapshot"] is False
    assert sha256(Path(imported["log"])) == exported["manifest"]["log_sha256"]

    code, out, _ = run(capsys, "ari-skill", str(tmp_path / "skill"), "--json")
    skill = json.loads(out)
    root = Path(skill["dir"])
    assert code == 0 and root == (tmp_path / "skill").resolve() and Path(skill["server"]).is_file()
    assert {f["path"] for f in skill["files"]} >= {"README.md", "src/server.py", "mcp.json"}
    assert all(sha256(root / f["path"]) == f["sha256"] for f in skill["files"])


def test_bench_json_lists_each_figure_and_sends_progress_to_stderr(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # the benchmarks are scripts of the checkout: `python -m bench`
    from bench.__main__ import main as bench_main
    from bench.common import Figure, report

    fake = types.ModuleType("bench.redact_bench")

    def fake_main(argv: list[str]) -> int:
        print(f"measuring with {argv}")  # a benchmark's own progress
        return report(
            [Figure("redact 1,000 events", 0.5, "s", None, "< 2 s", True), Figure("rss", 90, "MB", 80, "< 85", False)]
        )

    fake.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench.redact_bench", fake)
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # the dispatcher names the benchmark in argv[0]
    code = bench_main(["redact", "--runs", "1", "--json"])  # --json after the benchmark too
    out, err = capsys.readouterr()
    assert code == 1  # a figure missed its target
    data = json.loads(out)
    assert data["ok"] is False and list(data["benchmarks"]) == ["redact"]
    figures = data["benchmarks"]["redact"]["figures"]
    assert [f["name"] for f in figures] == ["redact 1,000 events", "rss"] and figures[1]["ok"] is False
    assert "measuring with ['--runs', '1']" in err and "FAIL  rss" in err and "== redact" in err


def test_bench_runs_the_clones_benchmarks_in_a_child_process(capfd) -> None:
    """`ari-ledger bench` imports nothing of bench/: it runs `python -m bench` of the clone, whose
    benchmark gets the arguments after its name and whose status is the command's."""
    code = main(["bench", "redact", "--help"])
    out, _ = capfd.readouterr()
    assert code == 0 and "== redact" in out and "usage: ari-ledger bench redact [-h] [--events EVENTS]" in out
    code = main(["bench", "redact", "--events", "many"])
    _, err = capfd.readouterr()
    assert code == 2 and "error: --events: expected a whole number, got 'many'" in err


# --- readable output ------------------------------------------------------------------------


def test_status_prints_words_not_python_reprs(capsys, demo: Path) -> None:
    code, out, _ = run(capsys, "status", str(demo / "checkpoint"))
    assert code == 0 and "{" not in out and "'" not in out
    lines = dict(line.strip().split(": ", 1) for line in out.splitlines())
    assert lines["events"] == "38 (1 core_seeded, 28 memory_added, 9 node_started); 0 redacted"
    assert lines["last seq"] == "38" and lines["nodes"] == "9" and lines["search"] == "embedded engine"
    assert lines["snapshot"].startswith("at seq ") and lines["log size"].endswith(" bytes")


def test_status_lines_say_lag_letta_alarms_and_notes_in_words() -> None:
    data = {
        "checkpoint": "/c",
        "ckpt": "id",
        "events": 5,
        "last_seq": 5,
        "nodes": 1,
        "types": {"memory_added": 5},
        "redacted": 1,
        "file_size": 1234,
        "projections": {
            "snapshot": {"cursor": 7, "lag": -2, "rollback": "the log ends at seq 5"},
            "search_engine": "letta",
            "letta": {"agent": "ari_agent_x", "cursor": 3, "lag": 2, "error": None, "duplicates": ["a", "b"]},
        },
        "alarms": ["the log ends at seq 5"],
        "notes": ["a torn tail"],
    }
    lines = [line.strip() for line in status_lines(data)]
    assert "log size: 1,234 bytes" in lines
    assert "snapshot: at seq 7, 2 ahead of the log; rollback: the log ends at seq 5" in lines
    assert "letta: agent ari_agent_x: at seq 3, 2 behind; 2 duplicate agent(s)" in lines
    assert lines[-2:] == ["alarm: the log ends at seq 5", "note: a torn tail"]
    assert status_lines({**data, "projections": {"snapshot": None, "search_engine": "embedded"}})[6].endswith(
        "snapshot: none"
    )
    later = status_lines({**data, "lock_holder": {"pid": 7}, "mode": "read-only"})
    assert later[-4:-2] == ['lock holder: {"pid": 7}', "      mode: read-only"]


def test_audit_summary_is_words(capsys, demo: Path) -> None:
    code, out, _ = run(capsys, "audit", str(demo / "checkpoint"))
    assert code == 1  # the demo's planted missing binary
    assert out.splitlines()[-1].startswith("artifacts: 49 verified, 1 missing, 0 mismatch, 0 unhashed; values: ")
    assert out.splitlines()[-1].endswith("; chain: ok") and "{" not in out
    assert counts({}) == "none"


def test_clip_cuts_after_a_whole_word() -> None:
    assert (
        clip("Parallelise the k/j loops with OpenMP (static schedule)", 40) == "Parallelise the k/j loops with OpenMP…"
    )
    assert clip("short text", 40) == "short text"
    assert clip("one  two\nthree", 40) == "one two three"
    assert clip("abc def", 5) == "abc…"
    assert clip("abcd efg", 5) == "abcd…"
    assert clip("a, b, c, d", 6) == "a, b…"
    assert clip("Supercalifragilistic", 8) == "Superca…"  # one word wider than the width: cut inside, marked


def test_the_demo_cuts_each_hit_after_a_whole_word(demo: Path, tmp_path: Path) -> None:
    done = cli("demo", str(tmp_path / "again"), "--json")
    assert done.returncode == 0, done.stderr
    with gzip.open(tmp_path / "again" / "checkpoint" / "memory_ledger" / "memory_ledger.jsonl.gz", "rt") as f:
        texts = [
            e["body"]["text"] for e in map(json.loads, f) if isinstance(e.get("body"), dict) and "text" in e["body"]
        ]
    cut = 0
    for row in json.loads(done.stdout)["scope"]:
        for _node, _score, shown in row["top_hits"]:
            if not shown.endswith("…"):
                assert shown in texts
                continue
            cut += 1
            head = shown[:-1]
            full = next(t for t in texts if " ".join(t.split()).startswith(head))
            rest = " ".join(full.split())[len(head) :]
            assert rest[:1] in (" ", ",", ";", ":"), (shown, full)  # the next character ends a word
    assert cut > 5


# --- damaged JSON names its file --------------------------------------------------------------


def test_read_json_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "verified_context.json"
    bad.write_text('{"lineage": [\n')
    with pytest.raises(InvalidInput) as caught:
        read_json(bad)
    assert str(caught.value) == f"{bad}: not valid JSON (Expecting value at line 2 column 1)"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InvalidInput, match=r"verified_context.json: not valid JSON \(not UTF-8 at byte 7\)"):
        read_json(bad)


@pytest.fixture
def copy(demo: Path, tmp_path: Path) -> Path:
    shutil.copytree(demo, tmp_path / "run", symlinks=True)
    return tmp_path / "run"


@pytest.mark.parametrize(
    "args",
    [["verified", "{ckpt}"], ["tree", "{ckpt}"], ["report", "{ckpt}", "-o", "{ckpt}/../r.html"]],
    ids=["verified", "tree", "report"],
)
def test_a_damaged_verified_context_is_one_error_line_naming_it(capsys, copy: Path, args: list[str]) -> None:
    ckpt = copy / "checkpoint"
    (ckpt / "verified_context.json").write_text('{"best_node": "node_A2", "lineage": [')
    code, out, err = run(capsys, *(a.replace("{ckpt}", str(ckpt)) for a in args))
    assert (code, out) == (2, "")
    assert err == f"error: {ckpt / 'verified_context.json'}: not valid JSON (Expecting value at line 1 column 38)\n"
    assert not (copy / "r.html").exists()


def test_a_verified_context_naming_an_unknown_node_is_one_error_line(capsys, copy: Path) -> None:
    ckpt = copy / "checkpoint"
    (ckpt / "verified_context.json").write_text('{"lineage": ["root", "gone"]}')
    code, out, err = run(capsys, "verified", str(ckpt))
    assert (code, out) == (2, "")
    assert err == (
        f"error: {ckpt / 'verified_context.json'}: its lineage names node 'gone', which this checkpoint does not know\n"
    )
    (ckpt / "verified_context.json").write_text('{"lineage": "root"}')
    code, out, err = run(capsys, "verified", str(ckpt))
    assert code == 2 and err.startswith(f"error: {ckpt / 'verified_context.json'}: records no lineage")


def test_a_damaged_bundle_manifest_is_one_error_line_naming_it(capsys, demo: Path, tmp_path: Path) -> None:
    import io
    import tarfile

    good = tmp_path / "good.tar"
    assert run(capsys, "export", str(demo / "checkpoint"), "-o", str(good))[0] == 0
    bad = tmp_path / "bad.tar"
    with tarfile.open(good) as src, tarfile.open(bad, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "manifest.json":
                data = b'{"format": '
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    code, out, err = run(capsys, "import", str(bad), str(tmp_path / "new"))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: bundle: {bad}: manifest.json is not valid JSON (") and err.count("\n") == 1
