"""Commands on files: bundles (``export``, ``import``) and ARI's memory files (``import-ari``, ``export-ari``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ledger import InvalidInput, layout
from ledger.ari_import import ARI_KINDS, BACKUP_NAME, FORMATS, REACT_NAME, STORE_NAME, ari_files_in, read_ari_file
from ledger.bundle import export_bundle, import_bundle
from ledger.layout import SNAPSHOT_NAME
from projections.adapters.cli.framework import CHECKPOINT_HELP, EXIT_OK, command, emit
from projections.adapters.cli.memory import open_backend
from projections.api.backend import MemoryBackend


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("out", help="bundle file to write (a tar of the log and a manifest)")


@command("export", "write a portable bundle: the verified log plus a manifest", _export_args)
def cmd_export(args: argparse.Namespace) -> int:
    manifest = export_bundle(Path(args.checkpoint), Path(args.out))
    print(f"exported {manifest['events']} events to {args.out}")
    return EXIT_OK


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", help="bundle file written by `ari-ledger export`")
    p.add_argument("checkpoint", help=f"{CHECKPOINT_HELP}, without a ledger yet (created when missing)")


@command("import", "place a bundle's log into an empty checkpoint (checked first)", _import_args)
def cmd_import(args: argparse.Namespace) -> int:
    manifest = import_bundle(Path(args.bundle), Path(args.checkpoint))
    print(f"imported {manifest['events']} events into {args.checkpoint}")
    if manifest["events"] and not _snapshot(Path(args.checkpoint)).exists():
        print(
            f"next: `ari-ledger rebuild {args.checkpoint}` saves its snapshot (until then every read folds the whole log)"
        )
    return EXIT_OK


def _import_ari_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help=f"{CHECKPOINT_HELP}; created when it does not exist and --source is given")
    p.add_argument(
        "--source",
        action="append",
        default=None,
        metavar="FILE",
        help=f"{BACKUP_NAME}, {STORE_NAME} or {REACT_NAME}, also *.migrated-<ts> (repeatable; "
        "default: every one found in CKPT, in the order ARI wrote them)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "import-ari",
    "import ARI's memory files (v0.6 backup, v0.5 store and ReAct trace); importing twice adds nothing",
    _import_ari_args,
)
def cmd_import_ari(args: argparse.Namespace) -> int:
    ckpt = Path(args.checkpoint)
    sources = [Path(s) for s in args.source] if args.source else ari_files_in(ckpt)
    if not sources:
        raise InvalidInput(
            "--source", f"no ARI memory file ({BACKUP_NAME}, {STORE_NAME}, {REACT_NAME}) in {ckpt}; pass --source FILE"
        )
    files = [read_ari_file(s) for s in sources]  # every file read and checked before anything is written
    backend = MemoryBackend(ckpt)
    try:
        report: list[dict[str, Any]] = [
            {
                "path": f.path,
                "format": f.format,
                "kinds": {
                    kind: backend.bulk_import(f.entries[kind], kind, source=Path(f.path).name)
                    for kind in ARI_KINDS
                    if kind in f.entries
                },
            }
            for f in files
        ]
    finally:
        backend.close()
    if args.json:
        emit(report)
        return EXIT_OK
    for item in report:
        done = "; ".join(
            f"{kind} {r['imported']} imported, {r['skipped'] - r.get('redacted', 0)} already there"
            + (f", {r['redacted']} skipped (redacted)" if r.get("redacted") else "")
            for kind, r in item["kinds"].items()
        )
        print(f"{item['path']} ({FORMATS[item['format']]}): {done or 'no entries'}")
    if not _snapshot(ckpt).exists():
        print(f"next: `ari-ledger rebuild {ckpt}` saves its snapshot (until then every read folds the whole log)")
    return EXIT_OK


def _snapshot(ckpt: Path) -> Path:
    return layout.log_path(ckpt).with_name(SNAPSHOT_NAME)


def _export_ari_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help=f"where to write (default: CKPT/{BACKUP_NAME})")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file even if it holds entries the checkpoint does not show",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


@command(
    "export-ari", f"write ARI's {BACKUP_NAME} (what `ari memory backup` writes), for ARI's restore", _export_ari_args
)
def cmd_export_ari(args: argparse.Namespace) -> int:
    from projections.api.ari_export import write_ari_backup

    backend = open_backend(args.checkpoint)
    try:
        result = write_ari_backup(backend, args.output, replace=args.force)
    except OSError as exc:
        raise InvalidInput(
            "--output", f"cannot write {args.output or Path(args.checkpoint) / BACKUP_NAME}: {exc.strerror or exc}"
        ) from None
    if args.json:
        emit(result)
    else:
        lines = result["lines"]
        print(f"wrote {result['path']}: " + ", ".join(f"{n} {kind}" for kind, n in lines.items()))
    return EXIT_OK
