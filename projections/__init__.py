"""The read side of ARI's memory ledger, and the API and tools built on it.

The layers point one way (``CONTRIBUTING.md``; checked by import-linter):

- ``models``  — pure folds of the log and what they are read as: catalog, semantic and lexical
  indexes, ARI's return shapes and the verdicts' words;
- ``engines`` — projections kept at a cursor (``local``: catalog + index + snapshot;
  ``letta``: one Letta agent) and the search engines over them;
- ``access``  — beside the engines: the access log (``memory_access.jsonl``), its writer
  thread, its reader and its chain;
- ``evidence``— beside them too: the rules of evidence (the value grammar, grounding, what makes
  a claim usable);
- ``api``     — ARI's ``MemoryBackend`` (the facade) behind one door, ``projections.api``: a
  session per checkpoint and small services;
- ``tools``   — for reviewers and operators, on the facade's public surface: status, verify,
  repair, prove, reads, lineage, redaction, rebuild, ARI's backup;
- ``adapters``— the CLI, the MCP server, the embeddings endpoint, the HTML report, the demo;
- ``letta_server`` — a local Letta server for tests, benchmarks and people (a tool beside the layers).

The front door is ``projections.api.get_backend``; ``from projections import
get_backend`` is a deprecated second door, loaded on first use (importing a model does not load
the API).
"""

from __future__ import annotations

import warnings
from typing import Any

_RETIRED = ("MemoryBackend", "clear_backend_cache", "get_backend")


def __getattr__(name: str) -> Any:
    """Deprecated: the names of ``projections.api``, imported from there."""
    if name in _RETIRED:
        warnings.warn(f"projections.{name} is deprecated; use projections.api.{name}", DeprecationWarning, stacklevel=2)
        from projections import api

        return getattr(api, name)
    raise AttributeError(f"module 'projections' has no attribute {name!r}")
