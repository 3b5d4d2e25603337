"""``prove`` checks what the paper reads (issue 25): the verified context built again as of its
anchor and compared whole (``claims``, ``usable_for_claims``), every field of a recorded read
replayed, and no false passes (nothing to prove, claims that cite nothing, bad arguments).

Each test states the verdict it expects before running the tool."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.layout import store_dir
from projections.access.chain import rechain
from projections.api import MemoryBackend
from projections.tools.prove import Proof, prove
from support.env import ari_ledger


@pytest.fixture
def copy(demo: Path, tmp_path: Path) -> Path:
    """A reviewer's copy of the run (checkpoint and experiments); returns its checkpoint."""
    shutil.copytree(demo, tmp_path / "copy", symlinks=True)
    return tmp_path / "copy" / "checkpoint"


def context_of(ckpt: Path) -> dict[str, Any]:
    return json.loads((ckpt / "verified_context.json").read_text())


def kept(ckpt: Path, context: dict[str, Any]) -> Path:
    """The context as a reviewer keeps it, outside the checkpoint."""
    path = ckpt.parent / "kept_context.json"
    path.write_text(json.dumps(context, indent=2))
    return path


def by_node(proof: Proof) -> dict[str, Any]:
    return {c.node_id: c for c in proof.claims}


def claim_of(context: dict[str, Any], node: str, key: str = "claims") -> dict[str, Any]:
    return next(c for c in context[key] if c["node_id"] == node)


# ---------------------------------------------------------------------------- A1: the context whole


def test_the_unmodified_demo_context_is_built_again_and_proves(copy: Path) -> None:
    """Expected: PROVED, the context built again as of its anchor with its three claims."""
    context = context_of(copy)
    proof = prove(copy)
    assert proof.ok and proof.verdict == "proved", (proof.failures, [c.failures for c in proof.claims])
    assert proof.recomputed is not None and proof.recomputed["as_of"] == context["anchor"]["seq"]
    assert proof.recomputed["claims"] == len(context["claims"]) == 3
    assert proof.recomputed["lineage"] == context["lineage"]


@pytest.mark.parametrize("field", ["text", "metric_ptr"])
def test_a_number_edited_in_usable_for_claims_fails_naming_the_claim(copy: Path, field: str) -> None:
    """The paper reads usable_for_claims: 9.87 made 19.87 there alone. Expected: node_A's claim
    fails, naming the field; the others hold; NOT PROVED."""
    context = context_of(copy)
    usable = claim_of(context, "node_A", "usable_for_claims")
    if field == "text":
        usable["text"] = usable["text"].replace("9.87", "19.87")
    else:
        usable["metric_ptr"]["value"] = 19.87
    proof = prove(copy, kept(copy, context))
    claims = by_node(proof)
    assert claims["node_A"].verdict == "fails" and claims["node_A"].entry_id == usable["entry_id"]
    assert f"its copy in usable_for_claims differs from the claim in claims: {field}" in claims["node_A"].failures
    assert claims["root"].verdict == claims["node_A2"].verdict == "holds"
    assert not proof.ok and proof.verdict == "not_proved"
    run = ari_ledger("prove", copy, "--context", kept(copy, context))
    assert run.returncode == 1 and run.stdout.splitlines()[-1].startswith("NOT PROVED: 2 of 3 claims hold")


def test_a_claim_dropped_from_the_context_fails_naming_it(copy: Path) -> None:
    """node_A's claim removed from claims and usable_for_claims alike. Expected: NOT PROVED,
    a failure naming its entry id as missing; the two left hold."""
    context = context_of(copy)
    dropped = claim_of(context, "node_A")
    for key in ("claims", "usable_for_claims"):
        context[key] = [c for c in context[key] if c["entry_id"] != dropped["entry_id"]]
    proof = prove(copy, kept(copy, context))
    assert [c.verdict for c in proof.claims] == ["holds", "holds"]
    missing = [f for f in proof.failures if dropped["entry_id"] in f]
    assert missing and "claims: " in missing[0] and "is missing: the library chooses it as of seq" in missing[0]
    assert any(f.startswith("usable_for_claims: " + dropped["entry_id"]) for f in proof.failures)
    assert not proof.ok


def test_a_claim_added_to_the_context_fails_naming_it(copy: Path) -> None:
    """node_B's real claim (its event, text and metric as the log holds them) added to a
    context of the root → node_A2 lineage. Expected: that claim fails as added, in both lists."""
    context = context_of(copy)
    backend = MemoryBackend(copy, readonly=True)
    other = backend.get_verified_context(["root", "node_B"], as_of=context["anchor"]["seq"])
    backend.close()
    added = json.loads(json.dumps(claim_of(dict(other), "node_B")))
    context["claims"].append(added)
    context["usable_for_claims"].append(added)
    proof = prove(copy, kept(copy, context))
    claim = next(c for c in proof.claims if c.entry_id == added["entry_id"])
    assert claim.verdict == "fails" and claim.event and claim.event["hash"]  # traced: a real event
    assert any(
        "not a claim the library chooses as of seq" in f and "(added to the context)" in f for f in claim.failures
    )
    assert any(f.startswith("in usable_for_claims, but the library leaves it out") for f in claim.failures)
    assert [c.verdict for c in proof.claims[:3]] == ["holds"] * 3 and not proof.ok


def test_a_usable_claim_that_is_not_one_of_the_claims_fails(copy: Path) -> None:
    """A claim slipped into usable_for_claims only. Expected: NOT PROVED, naming it."""
    context = context_of(copy)
    stray = dict(claim_of(context, "root"), entry_id="01a00000-0000-7000-8000-000000000000")
    context["usable_for_claims"].append(stray)
    proof = prove(copy, kept(copy, context))
    assert any(
        f.startswith(f"usable_for_claims: {stray['entry_id']} (root: ") and "is not one of the context's claims" in f
        for f in proof.failures
    )
    assert not proof.ok


def test_a_claim_dropped_from_usable_for_claims_alone_fails(copy: Path) -> None:
    """root's claim left out of what the paper reads. Expected: root's claim fails as dropped."""
    context = context_of(copy)
    root = claim_of(context, "root")
    context["usable_for_claims"] = [c for c in context["usable_for_claims"] if c["entry_id"] != root["entry_id"]]
    proof = prove(copy, kept(copy, context))
    claims = by_node(proof)
    assert claims["root"].verdict == "fails"
    assert any(f.endswith("the context leaves it out (dropped)") for f in claims["root"].failures)
    assert claims["node_A"].verdict == "holds" and not proof.ok


def test_an_evidence_level_raised_in_the_file_fails_naming_the_field(copy: Path) -> None:
    """root's claim said to be rerun_passed, in both lists alike. Expected: root fails on
    ``evidence``, the others hold."""
    context = context_of(copy)
    for key in ("claims", "usable_for_claims"):
        claim_of(context, "root", key)["evidence"] = "rerun_passed"
    proof = prove(copy, kept(copy, context))
    claims = by_node(proof)
    assert claims["root"].verdict == "fails"
    assert any(f.startswith('evidence: the context says "rerun_passed"') for f in claims["root"].failures)
    assert claims["node_A2"].verdict == claims["node_A"].verdict == "holds"


def test_a_context_built_before_later_events_is_a_note_not_a_failure(copy: Path) -> None:
    """One more entry after the context was written. Expected: PROVED, with a note saying how
    far behind the context is."""
    seq = context_of(copy)["anchor"]["seq"]
    backend = MemoryBackend(copy)
    backend.add_memory("node_A2", "a later note of node_A2", current_node="node_A2")
    last = backend.session.ledger.last_seq
    backend.close()
    proof = prove(copy)
    assert proof.ok, (proof.failures, [c.failures for c in proof.claims])
    behind = last - seq
    assert f"verified_context.json was built at seq {seq}, the log is at {last}: {behind} event later" in proof.notes
    assert behind == 1


def test_without_an_anchor_usable_items_are_still_traced_to_the_claims(copy: Path) -> None:
    """ARI's pipeline writes no anchor: not built again, but every usable item must be one of
    the claims with the same text. Expected: node_A fails on its usable copy's text; a usable
    item that is no claim fails; the "not checked" line says why it was not built again."""
    context = context_of(copy)
    for key in ("anchor", "as_of_seq"):
        context.pop(key)
    usable = claim_of(context, "node_A", "usable_for_claims")
    usable["text"] = usable["text"].replace("9.87", "19.87")
    context["usable_for_claims"].append(dict(usable, entry_id="01a00000-0000-7000-8000-000000000001"))
    proof = prove(copy, kept(copy, context))
    claims = by_node(proof)
    assert "its copy in usable_for_claims differs from the claim in claims: text" in claims["node_A"].failures
    assert any("01a00000-0000-7000-8000-000000000001" in f for f in proof.failures)
    assert any("carries no anchor (ARI's pipeline writes none)" in u for u in proof.unchecked)
    assert proof.recomputed is None and not proof.ok


# ---------------------------------------------------------------------------- A4: reads replayed whole


def forge_line(ckpt: Path, key: str, change) -> int:
    """Rewrite the first read line whose first result carries ``key``, chain the lines again
    and drop the head file (a forger cannot keep it); returns its line number."""
    path = ckpt / "memory_access.jsonl"
    raw = path.read_bytes().splitlines()
    i = next(i for i, line in enumerate(raw) if key in ((json.loads(line).get("results") or [{}])[0]))
    value = json.loads(raw[i])
    n = value["n"]
    for chained in ("n", "prev", "hash"):
        value.pop(chained)
    change(value["results"][0])
    forged = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    raw[i] = forged[:-1] + b',"n":%d,"prev":"%s","hash":"%s"}' % (n, b"0" * 64, b"0" * 64)
    lines, _ = rechain(raw, None)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    (store_dir(ckpt) / "memory_access.jsonl.head").unlink()
    return i + 1


def _score(result: dict[str, Any]) -> None:
    result["score"] = round(result["score"] + 0.05, 6)


def _source(result: dict[str, Any]) -> None:
    result["src_node_id"] = "node_B1" if result["src_node_id"] != "node_B1" else "node_B"


@pytest.mark.parametrize(("key", "change"), [("score", _score), ("src_node_id", _source)], ids=["score", "source"])
def test_a_rewritten_results_field_in_the_access_log_fails_its_replay(copy: Path, key: str, change) -> None:
    """The ids stay, what ARI shows of them (``results``) is rewritten and the lines chained again.
    Expected: the chain holds, the read replays as ``differs`` on ``results``; NOT PROVED."""
    n = forge_line(copy, key, change)
    proof = prove(copy)
    assert proof.access["ok"]
    [forged] = proof.read_failures
    assert forged["where"] == f"memory_access.jsonl:{n}" and forged["differing"] == ["results"]
    assert forged["why"].startswith("results #")
    assert not proof.ok
    run = ari_ledger("reads", copy, "--replay")
    assert run.returncode == 1 and "differs" in run.stdout and "results #" in run.stdout


# ---------------------------------------------------------------------------- B: no false passes


def test_a_missing_context_file_is_one_error_line_naming_it(copy: Path, tmp_path: Path) -> None:
    """Expected: exit 2, nothing on stdout, one ``error:`` line naming the file."""
    missing = tmp_path / "missing.json"
    run = ari_ledger("prove", copy, "--context", missing)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [f"error: --context: {missing}: no such file"]


def test_a_checkpoint_without_a_verified_context_has_nothing_to_prove(copy: Path) -> None:
    """Expected: exit 3, the last line ``NOTHING TO PROVE: no verified context at …``, never
    PROVED; in JSON, ok false."""
    (copy / "verified_context.json").unlink()
    run = ari_ledger("prove", copy)
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == f"NOTHING TO PROVE: no verified context at {copy / 'verified_context.json'}"
    assert "PROVED:" not in run.stdout.replace("NOTHING TO PROVE:", "")
    data = json.loads(ari_ledger("prove", copy, "--json").stdout)
    assert data["verdict"] == "nothing_to_prove" and data["ok"] is False and data["claims"] == []


def test_a_context_with_no_claims_is_never_proved(copy: Path) -> None:
    """Unanchored and empty: nothing to prove (exit 3). Anchored and emptied: the library
    chooses three claims there, so three are missing (exit 1)."""
    context = context_of(copy)
    context["claims"], context["usable_for_claims"] = [], []
    path = kept(copy, context)
    run = ari_ledger("prove", copy, "--context", path)
    assert run.returncode == 1 and run.stdout.splitlines()[-1].startswith("NOT PROVED: 0 of 0 claims hold")
    assert run.stdout.count("is missing: the library chooses it") == 3
    for key in ("anchor", "as_of_seq"):
        context.pop(key)
    path = kept(copy, context)
    run = ari_ledger("prove", copy, "--context", path)
    assert run.returncode == 3 and run.stdout.splitlines()[-1] == f"NOTHING TO PROVE: {path} lists no claims"


def test_a_claim_that_cites_nothing_is_not_proved(tmp_path: Path) -> None:
    """A paper claim with no artifact (evidence ``none``), its context exported and anchored.
    Expected: the claim fails as uncited; exit 1; the last line counts it under ``none``."""
    ckpt = tmp_path / "checkpoint"
    backend = MemoryBackend(ckpt)
    backend.add_typed_memory("root", "paper_claim", "root reaches 2.41 GFlops/s", current_node="root")
    context = backend.export_verified_context(["root"], tmp_path / "context.json")
    backend.close()
    proof = prove(ckpt, context)
    [claim] = proof.claims
    assert claim.evidence == "none" and claim.verdict == "fails"
    assert "it cites no artifact (evidence none): nothing backs it, so it cannot be proved" in claim.failures
    run = ari_ledger("prove", ckpt, "--context", context)
    assert run.returncode == 1 and run.stdout.splitlines()[-1] == "NOT PROVED: 0 of 1 claims hold (none 1)"


@pytest.mark.parametrize("replay", [False, True])
def test_reads_of_a_node_the_log_never_had_is_one_error_line(demo: Path, replay: bool) -> None:
    """Expected: exit 2, one ``error:`` line naming the node, nothing on stdout."""
    run = ari_ledger("reads", demo / "checkpoint", "--node", "ghost", *(["--replay"] if replay else []))
    assert run.returncode == 2 and run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("error: --node: unknown node 'ghost'")


# ---------------------------------------------------------------------------- the verdict line, the cost


def test_the_last_line_counts_the_claims_by_evidence_level(demo: Path) -> None:
    """Expected: ``PROVED: 3 of 3 claims hold (rerun_passed 1, …)``, strongest level first."""
    run = ari_ledger("prove", demo / "checkpoint")
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.splitlines()[-1]
    assert last.startswith("PROVED: 3 of 3 claims hold (rerun_passed 1, ") and last.endswith(")")
    counts = [part.rsplit(" ", 1) for part in last[last.index("(") + 1 : -1].split(", ")]
    order = ["rerun_passed", "values_checked", "verified", "hashed", "cited", "none"]
    assert sum(int(n) for _, n in counts) == 3 and [lv for lv, _ in counts] == sorted(
        (lv for lv, _ in counts), key=order.index
    )


def test_claims_are_traced_by_one_pass_over_the_log(demo: Path) -> None:
    """MemoryBackend.event_hashes gives each seq its event's id and hash, as event_at does one by one."""
    backend = MemoryBackend(demo / "checkpoint", readonly=True)
    ledger = backend.session.ledger
    seqs = [3, 5, 17, ledger.last_seq, ledger.last_seq + 5]
    found = backend.event_hashes(seqs)
    expected = {s: (e.id, e.hash) for s in seqs if (e := ledger.event_at(s)) is not None}
    backend.close()
    assert found == expected and len(found) == 4
