"""Commands on files: bundles (``export``, ``import``) and ARI's memory files (``import-ari``, ``export-ari``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger import InvalidInput, layout
from ledger.ari.importer import (
    ARI_KINDS,
    BACKUP_NAME,
    FORMATS,
    AriFile,
    ari_files_in,
    read_ari_file,
)
from ledger.checkpoint_format import V05_REACT_NAME as REACT_NAME
from ledger.checkpoint_format import V05_STORE_NAME as STORE_NAME
from ledger.layout import SNAPSHOT_NAME
from ledger.progress import Interrupted
from projections.adapters.cli.framework import (
    CHECKPOINT_HELP,
    ERROR_HELP,
    EXIT_ERROR,
    EXIT_OK,
    STDOUT,
    checkpoint_arg,
    command,
    deprecated,
    emit,
    output_arg,
    output_file,
    said,
)
from projections.adapters.cli.memory import open_backend
from projections.adapters.cli.progress import Reporter, folding, safe_points

if TYPE_CHECKING:  # the backend (numpy, the engines) and the bundle's tar and codecs: imported when used
    from projections.api import MemoryBackend


def _export_args(p: argparse.ArgumentParser) -> None:
    checkpoint_arg(p)
    output_arg(p, "the bundle file to write (a tar of the log and a manifest); required")
    p.add_argument("out", nargs="?", default=None, help=argparse.SUPPRESS)  # `export CKPT OUT`, deprecated


def _check_export(args: argparse.Namespace) -> None:
    """``-o FILE``, or the old positional ``OUT`` (still works, with a note); one of them, once."""
    if args.out is not None:
        if args.output is not None:
            raise InvalidInput("--output", f"give the bundle file once: -o {args.output} or {args.out}, not both")
        deprecated("`export CKPT OUT`", "`export CKPT -o OUT`")
        args.output = args.out
    if args.output is None:
        raise InvalidInput("--output", "missing: name the bundle file to write (-o FILE)")


@command(
    "export",
    "write a portable bundle: the verified log plus a manifest",
    _export_args,
    exit_codes={EXIT_ERROR: f"{ERROR_HELP}; no -o FILE, a damaged log (nothing written)"},
    check=_check_export,
)
def cmd_export(args: argparse.Namespace) -> int:
    from ledger.maintenance.bundle import export_bundle

    where = "standard output" if args.output == STDOUT else args.output
    try:
        with output_file(args.output) as out:
            manifest = export_bundle(Path(args.checkpoint), out)
    except KeyboardInterrupt:
        raise Interrupted(
            f"the checkpoint is unchanged and nothing was written to {where} (a bundle is written whole or not at all)"
        ) from None
    if args.json:
        emit({"path": args.output, "checkpoint": args.checkpoint, "manifest": manifest}, said(args.output))
    else:
        print(f"exported {manifest['events']:,} events to {where}", file=said(args.output))
    return EXIT_OK


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", help="bundle file written by `ari-ledger export`")
    p.add_argument("checkpoint", help=f"{CHECKPOINT_HELP}, without a ledger yet (created when missing)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("import", "place a bundle's log into an empty checkpoint (checked first)", _import_args)
def cmd_import(args: argparse.Namespace) -> int:
    manifest = _import_bundle(Path(args.bundle), Path(args.checkpoint))
    if args.json:
        log_path = layout.log_path(args.checkpoint)
        emit(
            {
                "bundle": args.bundle,
                "checkpoint": args.checkpoint,
                "log": str(log_path),
                "manifest": manifest,
                "snapshot": _snapshot(Path(args.checkpoint)).exists(),
            }
        )
        return EXIT_OK
    print(f"imported {manifest['events']:,} events into {args.checkpoint}")
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
    from projections.api import MemoryBackend

    ckpt = Path(args.checkpoint)
    sources = [Path(s) for s in args.source] if args.source else ari_files_in(ckpt)
    if not sources:
        raise InvalidInput(
            "--source", f"no ARI memory file ({BACKUP_NAME}, {STORE_NAME}, {REACT_NAME}) in {ckpt}; pass --source FILE"
        )
    files = _read_all(sources)  # every file read and checked before anything is written
    backend = MemoryBackend(ckpt, progress=folding(ckpt))
    try:
        report = _import_all(backend, files)
    except KeyboardInterrupt:
        backend.close_interrupted()  # what was folded may be saved; nothing more is folded
        raise
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


def _read_all(sources: list[Path]) -> list[AriFile]:
    """ARI's files read and checked, with a bar per file; Ctrl-C here has written nothing."""

    def note(done: int, total: int) -> str:
        return (
            f"nothing imported: ARI's files were being read and checked ({done:,} of {total:,} entries of "
            "a file) and nothing was written; run the same command again"
        )

    bar = Reporter("reading ARI's files", "entries", note=note)
    return [read_ari_file(source, progress=bar) for source in sources]


def _import_bundle(bundle: Path, ckpt: Path) -> dict[str, Any]:
    """``import_bundle`` with a bar as the staged log is verified. Its log is moved into place
    only once all of it verified: Ctrl-C leaves the checkpoint without a ledger, or with all of it."""
    from ledger.maintenance.bundle import import_bundle

    bar = Reporter("checking the bundle")
    try:
        return import_bundle(bundle, ckpt, progress=bar)
    except KeyboardInterrupt:
        if layout.log_path(ckpt).exists():  # (an existing ledger is refused before anything is read)
            raise Interrupted(
                f"the bundle's log had verified and was placed whole in {ckpt}: the import is done"
            ) from None
        checked = f" ({bar.done:,} of {bar.total:,} events checked)" if bar.total else ""
        raise Interrupted(f"nothing imported{checked}: {ckpt} holds no ledger; run the same command again") from None


def _import_all(backend: MemoryBackend, files: list[AriFile]) -> list[dict[str, Any]]:
    """Each file's entries, kind by kind, with one bar over all of them. Ctrl-C stops between two
    batches (each one group commit, synced): the batches before it are kept, whole, and since
    importing twice adds nothing, the same command again imports only the rest."""
    total = sum(len(f.entries[kind]) for f in files for kind in ARI_KINDS if kind in f.entries)
    bar = Reporter("importing", "entries")
    before, done = backend.last_seq, 0
    report: list[dict[str, Any]] = []
    try:
        with safe_points():
            for f in files:
                kinds: dict[str, Any] = {}
                for kind in ARI_KINDS:
                    if kind in f.entries:

                        def counted(d: int, _total: int, base: int = done) -> None:
                            bar(base + d, total)

                        kinds[kind] = backend.bulk_import(
                            f.entries[kind], kind, source=Path(f.path).name, progress=counted
                        )
                        done += len(f.entries[kind])
                report.append({"path": f.path, "format": f.format, "kinds": kinds})
    except KeyboardInterrupt:
        kept = backend.last_seq - before  # the events this import appended: its batches that were synced
        there = max(0, bar.done - kept)
        raise Interrupted(
            f"{kept:,} of {total:,} entries imported and kept"
            + (f", {there:,} were already there" if there else "")
            + " (the log verifies); run the same command again to import the rest"
        ) from None
    return report


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
    from projections.tools.ari_export import write_ari_backup

    target = args.output if args.output is not None else str(Path(args.checkpoint) / BACKUP_NAME)
    with output_file(target) as out:
        backend = open_backend(args.checkpoint)
        try:
            result = write_ari_backup(backend, out, replace=args.force)
        except OSError as exc:
            raise InvalidInput("--output", f"cannot write {target}: {exc.strerror or exc}") from None
    result["path"] = "-" if target == STDOUT else result["path"]
    if args.json:
        emit(result, said(target))
    else:
        lines = result["lines"]
        shown = "standard output" if target == STDOUT else result["path"]
        print(f"wrote {shown}: " + ", ".join(f"{n} {kind}" for kind, n in lines.items()), file=said(target))
    return EXIT_OK
