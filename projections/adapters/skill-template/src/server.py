"""ARI's memory skill, served by ari-memory-ledger.

ARI starts a skill as ``{python} {skill}/src/server.py`` (``{skill}/.venv/bin/python`` when it
exists, else ARI's own interpreter) with ``PYTHONPATH={skill}:{ari-core}``; this file hands stdio
to the ledger's MCP server, which that interpreter must have installed.
"""
import sys

try:
    from projections.adapters.mcp_server import main
except ModuleNotFoundError as exc:
    raise SystemExit(f"memory skill: {sys.executable} cannot import ari-memory-ledger ({exc}); see README.md") from exc

if __name__ == "__main__":
    raise SystemExit(main())
