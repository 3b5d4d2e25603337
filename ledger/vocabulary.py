"""The vocabulary of typed memory: kinds, statuses, roles, findings, digests.

The words the event bodies (``events``) and ARI's typed representation (``typed``) both speak;
here, below both, so neither imports the other to say them.
"""

from __future__ import annotations

import re
from typing import Literal, TypeGuard, get_args

import msgspec

KINDS = (
    "observation",
    "experiment_result",
    "failure_case",
    "procedure",
    "reflection",
    "artifact_summary",
    "paper_claim",
    "reproducibility_event",
)
REPRO_STATUSES = ("unverified", "rerun_passed", "rerun_failed", "paper_only_reproduced")
ReportRole = Literal["data_output", "log", "binary", "figure", "unknown"]  # node_report.json's roles
REPORT_ROLES: tuple[str, ...] = get_args(ReportRole)
ARTIFACT_ROLES = (*REPORT_ROLES, "source")  # plus the files a node added or modified
NodeLabel = Literal["draft", "improve", "debug", "ablation", "validation", "other"]  # ARI's node labels
NODE_LABELS: tuple[str, ...] = get_args(NodeLabel)

_SHA256 = re.compile(r"[0-9a-f]{64}")


class Finding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Something this library knows is wrong with a value it stored anyway.

    ARI's hooks must never lose a write to validation stricter than ARI's, so what ARI
    would store is stored, and what is wrong with it is recorded next to it.
    """

    field: str
    reason: str


def is_sha256(value: object) -> TypeGuard[str]:
    """True for a sha256 digest written as 64 lowercase hex characters."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None
