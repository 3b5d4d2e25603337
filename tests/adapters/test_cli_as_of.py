"""Every reading command travels in time: ``--as-of SEQ`` answers as the checkpoint stood after
event SEQ — nothing written later shows (nodes, entries, claims, verdicts, reads) — says which
seq it is as of, and a seq past the log's end is one error line, exit 2 (issue "One voice on
every surface"). Also: ``verified --block --json`` is JSON, and ``context`` with nothing to show
says so in one line.

The checkpoint is written in three steps, each leaving a marker in its texts and its own entry
ids: a step's markers and ids must not show in an answer as of an earlier step's last seq.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.layout import log_path
from ledger.log import scan_members
from projections.adapters.cli import main
from projections.api import MemoryBackend
from projections.evidence.grounded_block import render_grounded_block
from support.env import ARI_VARS

RUN = "run1"


@dataclass
class Built:
    """The checkpoint, its experiments root, and what each step wrote."""

    ckpt: Path
    experiments: Path
    seqs: list[int] = field(default_factory=list)  # the last seq of each step
    ids: list[set[str]] = field(default_factory=list)  # the entry ids each step wrote
    claims: list[set[str]] = field(default_factory=list)  # the claim ids among them
    nodes: list[set[str]] = field(default_factory=list)  # the nodes each step started

    @property
    def last(self) -> int:
        return self.seqs[-1]

    def upto(self, what: list[set[str]], step: int) -> set[str]:
        return set().union(*what[: step + 1])

    def later(self, step: int) -> list[str]:
        """What no answer as of ``step``'s last seq may show: later steps' markers and ids."""
        markers = [f"marker-step{k + 1}" for k in range(step + 1, len(self.seqs))]
        return markers + sorted(self.upto(self.ids, len(self.ids) - 1) - self.upto(self.ids, step))


def _artifact(experiments: Path, node: str, name: str, text: str) -> dict[str, str]:
    work = experiments / RUN / node
    work.mkdir(parents=True, exist_ok=True)
    (work / name).write_text(text)
    return {"path": name, "sha256": hashlib.sha256(text.encode()).hexdigest(), "role": "data_output"}


def _result(b: MemoryBackend, built: Built, node: str, text: str) -> str:
    """A typed, cited result of ``node`` (a claim), its artifact on disk."""
    art = _artifact(built.experiments, node, "out.txt", f"{text}\n")
    ref = {"run_id": RUN, "node_id": node}
    return b.add_experiment_result(node, text, None, [art], ref, current_node=node)["id"]


def _step(b: MemoryBackend, built: Built, nodes: set[str], ids: list[str], claims: list[str]) -> None:
    built.seqs.append(b.last_seq)
    built.nodes.append(nodes)
    built.ids.append(set(ids))
    built.claims.append(set(claims))


def _build(base: Path) -> Built:
    """Three steps: root (the experiment core, a claim, a result summary, a search); node_A (a
    claim, a search); node_B (a re-run that passes node_A's claim, a claim, a late note of the
    root's, a working context, then verified_context.json anchored at the end)."""
    built = Built(base / "ckpt", base / "experiments")
    b = MemoryBackend(built.ckpt)
    b.seed_core_memory("persona", "human", {"experiment_goal": "marker-step1 goal", "primary_metric": "score"})
    b.start_node("root", label="draft", current_node="root")
    root = _result(b, built, "root", "marker-step1 baseline result")
    summary = b.add_memory(
        "root", "RESULT SUMMARY marker-step1 status=success", {"type": "result_summary"}, current_node="root"
    )["id"]
    b.search_memory("baseline", ["root"])
    _step(b, built, {"root"}, [root, summary], [root])

    b.start_node("node_A", "root", ["root"], label="improve", current_node="node_A")
    a = _result(b, built, "node_A", "marker-step2 blocked result")
    b.search_memory("blocked", ["root", "node_A"])
    _step(b, built, {"node_A"}, [a], [a])

    b.start_node("node_B", "node_A", ["root", "node_A"], label="validation", current_node="node_B")
    rerun = _artifact(built.experiments, "node_B", "rerun.txt", "marker-step3 rerun\n")
    event = b.add_reproducibility_event(
        "node_B", a, "rerun_passed", [rerun], "marker-step3 rerun", current_node="node_B"
    )
    c = _result(b, built, "node_B", "marker-step3 validated result")
    late = b.add_memory("root", "marker-step3 a late note of the root", current_node="root")["id"]
    b.build_working_context("node_B", ["root", "node_A"], "validate")
    b.export_verified_context(["root", "node_A", "node_B"], built.ckpt)
    _step(b, built, {"node_B"}, [event["id"], c, late], [c])
    b.close()
    return built


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    with pytest.MonkeyPatch.context() as mp:  # a clean ARI environment (conftest's is per test)
        for name in ARI_VARS:
            mp.delenv(name, raising=False)
        return _build(tmp_path_factory.mktemp("as_of"))


def run(*args: object) -> tuple[int, str, str]:
    """``ari-ledger ARGS…`` in this process: exit code, stdout, stderr (``log`` writes bytes, ``--help`` exits)."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    out.flush()
    return code, out.buffer.getvalue().decode("utf-8"), err.getvalue()


def shows_nothing_later(built: Built, step: int, text: str) -> None:
    for later in built.later(step):
        assert later not in text, (step, later)


STEPS = [0, 1, 2]


# --- the new --as-of: tree, report, audit, prove ---------------------------------------------


@pytest.mark.parametrize("step", STEPS)
def test_tree_as_of_shows_the_nodes_entries_and_verdicts_of_then(built: Built, step: int) -> None:
    seq = built.seqs[step]
    code, out, err = run("tree", built.ckpt, "--experiments", built.experiments, "--as-of", seq, "--json")
    data = json.loads(out)
    assert (code, err) == (0, "") and data["as_of_seq"] == seq
    assert {n["node_id"] for n in data["nodes"]} == built.upto(built.nodes, step)
    assert {e["entry_id"] for n in data["nodes"] for e in n["entries"]} == built.upto(built.ids, step)
    shows_nothing_later(built, step, out)
    repro = {c["memory_id"]: c["repro_status"] for n in data["nodes"] for c in n["claims"]}
    node_a_claim = next(iter(built.claims[1]), None)
    if step >= 1:  # node_B's re-run passed node_A's claim at step 3, not before
        assert repro[node_a_claim] == ("rerun_passed" if step == 2 else "unverified")
    # verified_context.json was anchored at the last seq: its best lineage is not there before
    assert data["best_lineage"] == (["root", "node_A", "node_B"] if step == 2 else [])
    code, text, _ = run("tree", built.ckpt, "--experiments", built.experiments, "--as-of", seq)
    assert code == 0 and text.splitlines()[0].startswith(f"as of seq {seq}: memory as it stood then;")
    assert "today" in text.splitlines()[0]


def test_tree_as_of_0_says_there_was_nothing(built: Built) -> None:
    code, out, _ = run("tree", built.ckpt, "--as-of", 0)
    assert code == 0 and out.splitlines()[-1] == "no nodes as of seq 0: the log had no event yet"


@pytest.mark.parametrize("step", STEPS)
def test_report_as_of_draws_the_tree_of_then(built: Built, step: int, tmp_path: Path) -> None:
    seq, html = built.seqs[step], tmp_path / "r.html"
    args = ("report", built.ckpt, "-o", html, "--experiments", built.experiments, "--as-of", seq)
    code, out, err = run(*args)
    nodes = len(built.upto(built.nodes, step))
    assert (code, err) == (0, "") and out == f"wrote {html} ({nodes} nodes, as of seq {seq})\n"
    page = html.read_text()
    assert f"as of seq <strong>{seq}</strong>" in page and page.count('<g class="node ') == nodes
    shows_nothing_later(built, step, page)
    code, out, _ = run(*args, "--json")
    assert code == 0 and json.loads(out)["as_of_seq"] == seq and json.loads(out)["nodes"] == nodes


@pytest.mark.parametrize("step", STEPS)
def test_audit_as_of_checks_the_memory_of_then_against_todays_files(built: Built, step: int) -> None:
    seq = built.seqs[step]
    code, out, err = run("audit", built.ckpt, "--experiments", built.experiments, "--as-of", seq, "--json")
    audit = json.loads(out)
    assert (code, err) == (0, "") and audit["as_of_seq"] == seq
    cited = {i for r in audit["results"] for i in r["memory_ids"]}
    assert cited == built.upto(built.claims, step)  # each claim cites one file; the re-run cites no work dir
    assert {v["entry_id"] for v in audit["values"]} <= built.upto(built.ids, step)
    shows_nothing_later(built, step, out)
    code, text, _ = run("audit", built.ckpt, "--experiments", built.experiments, "--as-of", seq)
    assert code == 0 and text.rstrip().endswith(
        f"; as of seq {seq}: memory as it stood then; files on disk and the log chain as they are today"
    )


def _reads_at(built: Built) -> list[int]:
    code, out, _ = run("reads", built.ckpt, "--json")
    assert code == 0
    return [r["at"] for r in json.loads(out)["reads"]]


@pytest.mark.parametrize("step", STEPS)
def test_prove_as_of_proves_the_claims_and_reads_of_then(built: Built, step: int) -> None:
    seq = built.seqs[step]
    code, out, err = run("prove", built.ckpt, "--experiments", built.experiments, "--as-of", seq, "--json")
    proof = json.loads(out)
    assert err == "" and proof["as_of"] == proof["as_of_seq"] == seq
    assert {c["entry_id"] for c in proof["claims"]} == built.upto(built.claims, step)
    assert sum(proof["reads"].values()) == sum(at <= seq for at in _reads_at(built))
    assert proof["reads"]["differs"] == 0 and proof["read_failures"] == []
    assert "the files checked are today's" in proof["as_of_note"]
    shows_nothing_later(built, step, json.dumps({k: v for k, v in proof.items() if k != "context"}))
    built_again = "proving instead the verified context the library builds as of seq"
    assert any(built_again in n for n in proof["notes"]) == (seq < built.last)
    code, text, _ = run("prove", built.ckpt, "--experiments", built.experiments, "--as-of", seq)
    assert text.splitlines()[0].startswith(f"as of seq {seq} (the log is at seq {built.last}): ")
    assert code == {"proved": 0, "not_proved": 1}[proof["verdict"]]


@pytest.mark.parametrize("step", STEPS)
def test_reads_as_of_lists_and_replays_only_the_reads_made_by_then(built: Built, step: int) -> None:
    seq = built.seqs[step]
    everything = _reads_at(built)
    code, out, _ = run("reads", built.ckpt, "--as-of", seq, "--replay", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["as_of_seq"] == seq
    assert [r["at"] for r in shown["reads"]] == [at for at in everything if at <= seq]
    code, text, _ = run("reads", built.ckpt, "--as-of", seq)
    made = sum(at <= seq for at in everything)
    assert f"as of seq {seq}: {made} of {len(everything)} recorded read(s) were made by then" in text


def test_prove_as_of_0_has_nothing_to_prove(built: Built) -> None:
    code, out, _ = run("prove", built.ckpt, "--experiments", built.experiments, "--as-of", 0)
    assert (
        code == 3
        and out.splitlines()[-1] == "NOTHING TO PROVE: as of seq 0 the log had no event: no claim existed then"
    )


# --- the --as-of that was there: context, verified, search, log -------------------------------


@pytest.mark.parametrize("step", STEPS)
def test_context_verified_search_and_log_as_of_show_nothing_later(built: Built, step: int) -> None:
    seq, ckpt = built.seqs[step], built.ckpt
    code, out, _ = run("context", ckpt, "--as", "node_B", "--as-of", seq, "--json")
    ctx = json.loads(out)
    assert code == 0 and ctx["as_of_seq"] == seq and ctx["core"]["experiment_goal"] == "marker-step1 goal"
    assert {s["entry_id"] for s in ctx["ancestor_summaries"] + ctx["supplement"]} <= built.upto(built.ids, step)
    shows_nothing_later(built, step, out)

    code, out, _ = run("verified", ckpt, "--as", "node_B", "--as-of", seq, "--json")
    verified = json.loads(out)
    assert code == 0 and verified["as_of_seq"] == seq
    assert {c["entry_id"] for c in verified["claims"]} == built.upto(built.claims, step)
    shows_nothing_later(built, step, out)
    code, out, _ = run("verified", ckpt, "--as", "node_B", "--as-of", seq)
    assert code == 0 and out.startswith(f"claims of root → node_A → node_B (as of seq {seq})")

    code, out, _ = run("search", ckpt, "result", "--as", "node_B", "--as-of", seq, "--json")
    found = json.loads(out)
    assert code == 0 and found["as_of_seq"] == seq
    assert {r["entry_id"] for r in found["results"]} <= built.upto(built.ids, step)
    shows_nothing_later(built, step, out)

    code, out, _ = run("log", ckpt, "--as-of", seq)
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["seq"] for e in events] == list(range(1, seq + 1))
    shows_nothing_later(built, step, out)


def test_context_with_nothing_to_show_says_so_in_one_line(built: Built) -> None:
    code, out, err = run("context", built.ckpt, "--as", "root", "--as-of", 0)
    assert (code, err) == (0, "")
    assert out == "node root had no context as of seq 0: the log had no event yet (its first is seq 1)\n"
    # root has no ancestors: after the core is seeded it has it, before nothing
    code, out, _ = run("context", built.ckpt, "--as", "root", "--as-of", 1)
    assert code == 0 and out.startswith("as of seq 1\n") and "marker-step1 goal" in out


def test_verified_block_json_is_one_json_document_of_what_the_block_holds(built: Built) -> None:
    code, out, _ = run("verified", built.ckpt, "--as", "node_B", "--block", "--json")
    data = json.loads(out)  # one document, not Markdown
    assert code == 0 and set(data) == {"usable_for_claims", "limitations", "lineage", "as_of_seq", "block"}
    _, block, _ = run("verified", built.ckpt, "--as", "node_B", "--block")
    assert data["block"] == block and render_grounded_block(data) == block  # the data renders to the block
    assert {c["entry_id"] for c in data["usable_for_claims"]} <= built.upto(built.claims, 2)
    code, out, _ = run("verified", built.ckpt, "--as", "node_B", "--block", "--json", "--as-of", built.seqs[0])
    early = json.loads(out)
    assert code == 0 and early["as_of_seq"] == built.seqs[0]
    assert {c["entry_id"] for c in early["usable_for_claims"]} <= built.claims[0]
    code, out, _ = run("verified", built.ckpt, "--as", "node_B", "--block", "--json", "--as-of", 0)
    assert code == 0 and json.loads(out) | {"lineage": None} == {
        "usable_for_claims": [],
        "limitations": [],
        "lineage": None,
        "as_of_seq": 0,
        "block": "",
    }


# --- a seq past the end, or below 0, is one error line ---------------------------------------

COMMANDS = {
    "tree": ["tree", "{ckpt}"],
    "report": ["report", "{ckpt}", "-o", "{tmp}/r.html"],
    "audit": ["audit", "{ckpt}", "--experiments", "{exp}"],
    "prove": ["prove", "{ckpt}", "--experiments", "{exp}"],
    "context": ["context", "{ckpt}", "--as", "root"],
    "verified": ["verified", "{ckpt}", "--as", "root"],
    "search": ["search", "{ckpt}", "q", "--as", "root"],
    "log": ["log", "{ckpt}"],
    "reads": ["reads", "{ckpt}"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_seq_past_the_end_is_one_error_line(built: Built, name: str, tmp_path: Path) -> None:
    args = [a.format(ckpt=built.ckpt, tmp=tmp_path, exp=built.experiments) for a in COMMANDS[name]]
    code, out, err = run(*args, "--as-of", built.last + 1)
    assert (code, out) == (2, "")
    assert err == f"error: --as-of: seq {built.last + 1} is beyond the log's last seq {built.last}\n"
    code, out, err = run(*args, "--as-of", -1)
    assert (code, out, err) == (2, "", "error: --as-of: must be a seq (0 or more), got -1\n")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("name", ["tree", "report", "audit", "prove", "reads"])
def test_the_new_as_of_reads_as_everywhere(name: str) -> None:
    code, out, _ = run(name, "--help")
    assert code == 0 and re.search(r"--as-of SEQ\s+as of this seq: the log up to and including it", out)
    assert "an --as-of outside the log" in " ".join(out.split())


# --- as of N is the checkpoint of the first N events ------------------------------------------


def _prefix(built: Built, seq: int, where: Path) -> Path:
    """A checkpoint holding only the log's first ``seq`` events (every append here is its own
    gzip member), with verified_context.json when it was anchored by then."""
    ckpt = where / "ckpt"
    shutil.rmtree(where, ignore_errors=True)
    log_path(ckpt).parent.mkdir(parents=True)
    with open(log_path(built.ckpt), "rb") as f:
        end = next(m.end for m in scan_members(f) if json.loads(m.data.splitlines()[-1])["seq"] == seq)
        f.seek(0)
        log_path(ckpt).write_bytes(f.read(end))
    saved = json.loads((built.ckpt / "verified_context.json").read_text())
    if saved["anchor"]["seq"] <= seq:
        shutil.copy(built.ckpt / "verified_context.json", ckpt)
    return ckpt


def _tree(ckpt: Path, experiments: Path, *extra: object) -> dict[str, Any]:
    code, out, err = run("tree", ckpt, "--experiments", experiments, "--json", *extra)
    assert (code, err) == (0, "")
    data = json.loads(out)
    del data["checkpoint"]  # where it is, not what it holds
    return data


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tree_as_of_n_is_the_tree_of_the_first_n_events(built: Built, tmp_path: Path, data: st.DataObject) -> None:
    seq = data.draw(st.integers(min_value=1, max_value=built.last), label="seq")
    prefix = _prefix(built, seq, tmp_path / f"prefix{seq}")
    assert _tree(built.ckpt, built.experiments, "--as-of", seq) == _tree(prefix, built.experiments)
