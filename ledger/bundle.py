"""Portable bundles: the log and a manifest, nothing that cannot be rebuilt.

``export_bundle`` writes a tar holding ``memory_ledger.jsonl.gz`` and ``manifest.json``
(checkpoint id, event count, last hash, sha256 of the log). ``import_bundle`` checks all of
it before the log is placed into an empty checkpoint; projections rebuild on first open.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from .errors import InvalidInput, LogCorrupted
from .ledger import Ledger
from .log import LOG_NAME
from .provenance import sha256_file

MANIFEST = "manifest.json"
FORMAT = "ari-memory-ledger-bundle/1"


def export_bundle(checkpoint_dir: Path, out: Path) -> dict[str, Any]:
    with Ledger.open_readonly(checkpoint_dir) as ledger:
        report = ledger.verify()
        if not report.ok:
            raise LogCorrupted(f"refusing to export a damaged log: {report.summary()}", seq=report.first_bad_seq, offset=report.offset)
        last = next(ledger.events(after=report.last_seq - 1), None) if report.last_seq else None
        manifest = {
            "format": FORMAT,
            "ckpt": last.ckpt if last else None,
            "events": report.events,
            "last_hash": last.hash if last else "",
            "log_sha256": sha256_file(ledger.path),
        }
        tmp = out.with_name(out.name + ".tmp")
        with tarfile.open(tmp, "w") as tar:
            tar.add(ledger.path, arcname=LOG_NAME)
            data = json.dumps(manifest, indent=2).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    return manifest


def import_bundle(bundle: Path, checkpoint_dir: Path) -> dict[str, Any]:
    target = checkpoint_dir / LOG_NAME
    if target.exists():
        raise InvalidInput("checkpoint", f"{checkpoint_dir} already has a ledger; import into an empty checkpoint")
    try:
        with tarfile.open(bundle) as tar:
            manifest = json.load(tar.extractfile(MANIFEST))
            log_member = tar.extractfile(LOG_NAME)
            if manifest.get("format") != FORMAT or log_member is None:
                raise InvalidInput("bundle", f"{bundle} is not an {FORMAT} bundle")
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=checkpoint_dir) as staging:
                staged = Path(staging) / LOG_NAME
                staged.write_bytes(log_member.read())
                if sha256_file(staged) != manifest["log_sha256"]:
                    raise InvalidInput("bundle", "the log's sha256 does not match the manifest")
                with Ledger.open_readonly(staging) as ledger:
                    report = ledger.verify()
                    last = next(ledger.events(after=report.last_seq - 1), None) if report.ok and report.last_seq else None
                if not report.ok or report.events != manifest["events"]:
                    raise InvalidInput("bundle", f"the log does not verify: {report.summary()}")
                if last is not None and (last.hash != manifest["last_hash"] or last.ckpt != manifest["ckpt"]):
                    raise InvalidInput("bundle", "the log's last event or checkpoint id differs from the manifest")
                os.replace(staged, target)
    except (tarfile.TarError, KeyError, json.JSONDecodeError, OSError) as exc:
        raise InvalidInput("bundle", f"cannot read {bundle}: {exc}") from None
    return manifest
