"""Reading ARI's ``node_report.json`` safely, and its hash: what a grounding check needs.

Kept apart from the typed models (:mod:`ledger.ari.node_report`, pydantic): a process that only
writes and searches memory, or re-hashes a report to check a result, never imports them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import msgspec

from ledger.errors import InvalidInput, os_reason
from ledger.safe_io import UnsafeFile, read_file

MAX_REPORT_BYTES = 16 * 1024 * 1024


def report_hash(report: Any) -> str:
    """sha256 of the report's canonical JSON, so re-consolidating the same report is a no-op.

    ``report`` is the decoded JSON, or a :class:`~ledger.ari.node_report.NodeReport`: a model
    hashes the fields it was given (defaults it filled in are left out), so a dict and the
    model loaded from it hash the same. NaN hashes as null, as it is stored.
    """
    dump = getattr(report, "model_dump", None)  # a NodeReport, without importing pydantic here
    data = dump(mode="json", exclude_unset=True) if callable(dump) else report
    try:
        text = _canonical(data)
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidInput("node_report", f"not JSON-serialisable: {exc}") from None
    return hashlib.sha256(text).hexdigest()


def read_report_file(path: Path, inside: Path | None = None) -> Any:
    """A report file's JSON, read safely: a regular file, at most 16 MiB, inside ``inside``.

    Read by :func:`ledger.safe_io.read_file` (non-blocking, never through a link at its last
    component, checked with fstat before reading), so a FIFO or a device (``/dev/zero``) is
    refused instead of hanging or filling memory.
    """
    target = path
    if inside is not None:
        real, root = Path(os.path.realpath(path)), Path(os.path.realpath(inside))
        if not real.is_relative_to(root):
            raise InvalidInput("node_report", f"{path} is outside the node's work dir {inside}; not read")
        target = real  # a link inside the work dir is followed here, never at the open
    try:
        raw = read_file(target, MAX_REPORT_BYTES)
    except FileNotFoundError:
        raise InvalidInput("node_report", f"file not found: {path}") from None
    except UnsafeFile as exc:  # a link, a FIFO, a device, a directory, too big: one line, nothing read
        raise InvalidInput("node_report", str(exc)) from None
    except OSError as exc:
        raise InvalidInput("node_report", f"cannot read {path}: {os_reason(exc)}") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("node_report", f"{path} is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            "node_report", f"invalid JSON in {path} at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None


_encoder = msgspec.json.Encoder(order="deterministic")


def _canonical(data: Any) -> bytes:
    return _encoder.encode(data)
