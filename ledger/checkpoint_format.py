"""The files of a checkpoint directory: every name and suffix, defined here and nowhere else.

A checkpoint is ARI's ``checkpoints/<run_id>/``. This project keeps its own files in one
subdirectory, ``memory_ledger/`` (ARI copies every top-level *file* of a checkpoint into each
node's work dir, never a subdirectory; see ``ledger.layout``), and writes ARI's own files where
ARI reads them, at the top::

    <checkpoint>/
      memory_ledger/
        memory_ledger.jsonl.gz               the log: gzip JSON Lines, one hash-chained event a
                                             line (docs/events.md): the one source of truth
        memory_ledger.jsonl.gz.head          the head anchor: the newest acknowledged event
        memory_ledger.jsonl.gz.idx           sparse side index: (byte offset, first seq) pairs
        memory_ledger.jsonl.gz.rollbacks     what people accepted with verify --accept-rollback
        memory_ledger.jsonl.gz.repair        a repair under way (its journal)
        memory_ledger.jsonl.gz.redact        a redaction whose derived files are not all scrubbed
        memory_ledger.jsonl.gz.redact-tmp    a redaction's new log before it replaces the old
        memory_ledger.jsonl.gz.torn-<stamp>  a torn tail, moved aside by recovery
        memory_ledger.jsonl.gz.damaged-<stamp>  a damaged log's bytes, set aside by repair
        memory_projection.snapshot           the local projection's snapshot (a checked cache)
        memory_access.jsonl.head             the access log's newest line
        letta_push.lock                      one Letta push at a time
      memory_access.jsonl                    ARI's access log (rotated: memory_access.<time>[_<n>].jsonl)
      memory_access.summary.json             what `ari memory compact-access` leaves of rotated logs
      verified_context.json                  the paper stage's claims, anchored at the log's head
      memory_backup.jsonl.gz                 ARI's backup of the memory
      memory_store.jsonl, memory.json        ARI v0.5's memory store and ReAct trace (read, never written)

A file set aside by a person's command is renamed ``<name>.rolled-back-<stamp>`` (by
``verify --accept-rollback``) or ``<name>.repaired-<stamp>`` (by ``repair``), in its folder. A
file rewritten whole goes through a temporary beside it (``<name>.tmp-<random>``, or the
snapshot's ``<name>.<pid>.<random>.tmp``) renamed over it. Checkpoints of layout 1 held the
``memory_ledger/`` files at the top level, the snapshot named ``memory_projection.snapshot.zst``.

:data:`FILES` is this table as data: ``docs/architecture.md``'s table of a checkpoint's files is
held to it by a test.
"""

from __future__ import annotations

from typing import NamedTuple

STORE_DIR = "memory_ledger"  # the folder of this project's files in a checkpoint

# the log, and the files named after it beside it
LOG_NAME = "memory_ledger.jsonl.gz"
HEAD_SUFFIX = ".head"  # the head anchor (of the log, and of the access log)
INDEX_SUFFIX = ".idx"
OLD_INDEX_TMP_SUFFIX = ".idx.tmp"  # an earlier version's side index while it was written
ROLLBACKS_SUFFIX = ".rollbacks"
REPAIR_INTENT_SUFFIX = ".repair"
REDACT_INTENT_SUFFIX = ".redact"
REDACT_TMP_SUFFIX = ".redact-tmp"
TORN_MARK = ".torn-"  # + a UTC stamp
DAMAGED_MARK = ".damaged-"  # + a UTC stamp
# a file a person's command set aside, in its folder: + a UTC stamp
ROLLED_BACK_MARK = ".rolled-back-"
REPAIRED_MARK = ".repaired-"
TEMP_MARK = ".tmp-"  # a whole-file rewrite's temporary: + random hex (ledger.safe_io.create_temp)
SNAPSHOT_TEMP_SUFFIX = ".tmp"  # the snapshot's temporary while it is written: <name>.<pid>.<random>.tmp

SNAPSHOT_NAME = "memory_projection.snapshot"
OLD_SNAPSHOT_NAME = "memory_projection.snapshot.zst"  # its layout-1 name (it was never zstd in format 6)
LETTA_LOCK_NAME = "letta_push.lock"

# ARI's files, at the checkpoint's top where ARI reads them
ACCESS_STEM = "memory_access"
ACCESS_LOG_NAME = f"{ACCESS_STEM}.jsonl"
ACCESS_ROTATED = ACCESS_STEM + ".{stamp}.jsonl"  # a rotated access log; a second in one second: {stamp}_001
ACCESS_SUMMARY_NAME = f"{ACCESS_STEM}.summary.json"
VERIFIED_CONTEXT_NAME = "verified_context.json"
BACKUP_NAME = "memory_backup.jsonl.gz"  # ARI v0.6+: `ari memory backup`, and every run's exit
V05_STORE_NAME = "memory_store.jsonl"  # ARI v0.5: the memory skill's node-scope entries
V05_REACT_NAME = "memory.json"  # ARI v0.5: FileMemoryClient's ReAct trace


class CheckpointFile(NamedTuple):
    """One row of a checkpoint's file table: its path as the docs write it, and what it is."""

    path: str  # relative to the checkpoint; <…> stands for what varies
    what: str


FILES: tuple[CheckpointFile, ...] = (
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}", "the log"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{HEAD_SUFFIX}", "the head anchor"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{INDEX_SUFFIX}", "sparse side index"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{TORN_MARK}<UTC stamp>", "a torn tail moved aside"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{DAMAGED_MARK}<UTC stamp>", "a damaged log set aside by repair"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{ROLLBACKS_SUFFIX}", "rollbacks people accepted"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{REPAIR_INTENT_SUFFIX}", "a repair under way"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{REDACT_INTENT_SUFFIX}", "a redaction under way"),
    CheckpointFile(f"{STORE_DIR}/{LOG_NAME}{REDACT_TMP_SUFFIX}", "a redaction's new log"),
    CheckpointFile(f"<name>{ROLLED_BACK_MARK}<UTC stamp>", "a file set aside by --accept-rollback"),
    CheckpointFile(f"<name>{REPAIRED_MARK}<UTC stamp>", "a file set aside by repair"),
    CheckpointFile(f"{STORE_DIR}/{SNAPSHOT_NAME}", "the local projection's snapshot"),
    CheckpointFile(f"{STORE_DIR}/{LETTA_LOCK_NAME}", "one Letta push at a time"),
    CheckpointFile(ACCESS_LOG_NAME, "ARI's access log"),
    CheckpointFile(ACCESS_ROTATED.format(stamp="<unix time>[_<n>]"), "a rotated access log"),
    CheckpointFile(ACCESS_SUMMARY_NAME, "what compact-access leaves of rotated logs"),
    CheckpointFile(f"{STORE_DIR}/{ACCESS_LOG_NAME}{HEAD_SUFFIX}", "the access log's newest line"),
    CheckpointFile(VERIFIED_CONTEXT_NAME, "claims for the paper stage"),
    CheckpointFile(BACKUP_NAME, "ARI's backup"),
    CheckpointFile(V05_STORE_NAME, "ARI v0.5's memory store"),
    CheckpointFile(V05_REACT_NAME, "ARI v0.5's ReAct trace"),
)
