"""node_report.json parsing: strict types, dotted field names in errors, order-free hashing."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.ari.node_report import load_node_report, report_hash
from ledger.errors import InvalidInput
from support.env import FIXTURES

RUN_DIR = FIXTURES / "ari_run" / "experiments" / "run_20261128_stencil"
GOOD_PATH = RUN_DIR / "node_A2" / "node_report.json"
GOOD = json.loads(GOOD_PATH.read_text(encoding="utf-8"))
_DROP = object()


def _variant(**changes) -> dict:
    data = copy.deepcopy(GOOD)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = data
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is _DROP:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return data


def test_good_report_loads_from_path_str_and_dict():
    from_path = load_node_report(GOOD_PATH)
    assert from_path == load_node_report(str(GOOD_PATH)) == load_node_report(GOOD)
    assert from_path.node_id == "node_A2"
    assert from_path.ancestor_ids == ["root", "node_A"]
    assert from_path.metrics["_scientific_score"] == 0.83
    assert from_path.files_changed.modified[0].sha256_after.isalnum()
    assert from_path.artifacts[-1].sha256 is None


def test_integer_metrics_stay_integers():
    report = load_node_report(RUN_DIR / "node_A22" / "node_report.json")
    assert report.metrics["repetitions"] == 5 and type(report.metrics["repetitions"]) is int


def test_unknown_fields_are_kept_not_refused():
    data = _variant(future_field={"added_by": "ari 2.0"}, self_assessment__confidence=0.7)
    report = load_node_report(data)
    assert report.model_extra == {"future_field": {"added_by": "ari 2.0"}}
    assert report.self_assessment.model_extra == {"confidence": 0.7}


def test_root_report_has_no_parent():
    report = load_node_report(RUN_DIR / "root" / "node_report.json")
    assert report.parent_id is None and report.depth == 0 and report.ancestor_ids == []


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        ({"schema_version": 2}, "schema_version", "expected 1"),
        ({"schema_version": "1"}, "schema_version", "expected 1"),
        ({"node_id": _DROP}, "node_id", "required field is missing"),
        ({"node_id": ""}, "node_id", "at least 1 character"),
        ({"label": "explore"}, "label", "'draft'"),
        ({"depth": "2"}, "depth", "valid integer"),
        ({"depth": -1}, "depth", "greater than or equal to 0"),
        ({"depth": 1}, "depth", "does not match 2 ancestor_ids"),
        ({"parent_id": "root"}, "parent_id", "not the last of ancestor_ids"),
        ({"ancestor_ids": ["root", "node_A2"], "parent_id": "node_A2"}, "ancestor_ids", "contains the node itself"),
        ({"metrics__GFlops_per_s": True}, "metrics.GFlops_per_s", "expected a number"),
        ({"metrics__GFlops_per_s": "15.82"}, "metrics.GFlops_per_s", "expected a number"),
        ({"metrics__GFlops_per_s": float("nan")}, "metrics.GFlops_per_s", "finite"),
        ({"files_changed__added__0__sha256": "DCDEE3" + "0" * 58}, "files_changed.added[0].sha256", "64 lowercase hex"),
        (
            {"files_changed__modified__1__sha256_before": "abc"},
            "files_changed.modified[1].sha256_before",
            "64 lowercase hex",
        ),
        ({"files_changed__deleted": ["src/timer.h", 7]}, "files_changed.deleted[1]", "valid string"),
        ({"artifacts__2__role": 7}, "artifacts[2].role", "valid string"),
        ({"artifacts__0__sha256": "g" * 64}, "artifacts[0].sha256", "64 lowercase hex"),
        ({"artifacts__0__size": -1}, "artifacts[0].size", "greater than or equal to 0"),
        ({"artifacts__1__filename": _DROP}, "artifacts[1].filename", "required field is missing"),
        ({"self_assessment__succeeded": "yes"}, "self_assessment.succeeded", "valid boolean"),
        ({"next_steps_hints": "ablate first touch"}, "next_steps_hints", "valid list"),
    ],
)
def test_malformed_report_names_the_dotted_field(changes, field, reason):
    with pytest.raises(InvalidInput) as info:
        load_node_report(_variant(**changes))
    assert info.value.field == field
    assert reason in info.value.reason
    assert str(info.value) == f"{field}: {info.value.reason}"


def test_bad_json_file(tmp_path):
    path = tmp_path / "node_report.json"
    path.write_text('{"schema_version": 1, "node_id": ', encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"^node_report: invalid JSON .* line 1") as info:
        load_node_report(path)
    assert info.value.field == "node_report"


def test_missing_file(tmp_path):
    with pytest.raises(InvalidInput, match="file not found") as info:
        load_node_report(tmp_path / "nope" / "node_report.json")
    assert info.value.field == "node_report"


def test_json_that_is_not_an_object(tmp_path):
    path = tmp_path / "node_report.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InvalidInput, match="expected a JSON object") as info:
        load_node_report(path)
    assert info.value.field == "node_report"


def test_non_utf8_file(tmp_path):
    path = tmp_path / "node_report.json"
    path.write_bytes(b'{"node_id": "\xff"}')
    with pytest.raises(InvalidInput, match="not UTF-8"):
        load_node_report(path)


def _reordered(value):
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


def test_report_hash_ignores_key_order_at_every_level():
    assert list(_reordered(GOOD)) != list(GOOD)
    assert report_hash(_reordered(GOOD)) == report_hash(GOOD)


@given(st.permutations(sorted(GOOD)))
def test_report_hash_ignores_top_level_key_order(keys):
    assert report_hash({k: GOOD[k] for k in keys}) == report_hash(GOOD)


def test_report_hash_is_the_same_for_a_dict_and_its_model():
    for path in sorted(RUN_DIR.glob("*/node_report.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert report_hash(load_node_report(raw)) == report_hash(raw), path.parent.name


def test_defaults_filled_by_the_model_do_not_change_the_hash():
    required = ("schema_version", "node_id", "label", "depth", "status", "files_changed", "metrics", "artifacts")
    minimal = {k: GOOD[k] for k in required}  # ARI's schema: no parent, ancestors or self-assessment needed
    model = load_node_report(minimal)
    assert model.next_steps_hints == [] and model.build_command == "" and model.parent_id is None
    assert report_hash(model) == report_hash(minimal)


def test_report_hash_changes_with_content():
    assert report_hash(_variant(metrics__GFlops_per_s=15.83)) != report_hash(GOOD)
    assert report_hash(GOOD) == report_hash(json.loads(json.dumps(GOOD)))
    assert len(report_hash(GOOD)) == 64


def test_report_hash_holds_nan_as_it_is_stored():
    assert report_hash({"metrics": {"x": float("nan")}}) == report_hash({"metrics": {"x": None}})
    with pytest.raises(InvalidInput) as info:
        report_hash({"metrics": {"x": object()}})
    assert info.value.field == "node_report"
