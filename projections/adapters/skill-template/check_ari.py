"""Check ARI after the switch, with ARI's own code: run it with ARI's Python.

    "$ARI_PY" check_ari.py "$ARI_ROOT"

ARI's MCP client (``ari.mcp.client.MCPClient``) starts the memory skill and one other of ARI's
skills from ``ari-core/config/workflow.yaml`` exactly as ``ari run`` does and lists their tools;
ari-core's in-process door (``ari_skill_memory.backends.get_backend``) must land on the ledger.
Exit 0 only when all of it works: a package moved under ARI (an ``mcp`` that ARI's client cannot
read, say) makes ARI's client list no tools, and this exits 1 saying which.
"""

import os
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

OTHER_SKILL = "evaluator-skill"


def main() -> int:
    ari_root = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ARI_ROOT", ".")).resolve()
    os.environ["ARI_ROOT"] = str(ari_root)
    os.environ.setdefault("ARI_CHECKPOINT_DIR", tempfile.mkdtemp(prefix="ari-check-"))
    from ari.config import load_config
    from ari.mcp.client import MCPClient

    skills = {s.name: s for s in load_config(str(ari_root / "ari-core" / "config" / "workflow.yaml")).skills}
    problems = []
    print(f"mcp {version('mcp')}, ari-memory-ledger {version('ari-memory-ledger')}")
    for name, needed in (("memory-skill", {"search_memory", "_set_current_node", "consolidate_node_memory"}), (OTHER_SKILL, set())):
        client = MCPClient([skills[name]])
        try:
            tools = {t["name"] for t in client.list_tools()}
        finally:
            client.close_all()
        print(f"{name}: {len(tools)} tools from {skills[name].path}")
        if not tools or not needed <= tools:
            problems.append(f"ARI's MCP client lists {len(tools)} tools of {name} (missing: {sorted(needed - tools)})")
    import ari_skill_memory.backends as backends

    backend = backends.get_backend(os.environ["ARI_CHECKPOINT_DIR"])
    served_by = type(backend).__module__
    print(f"ari_skill_memory.backends.get_backend -> {served_by}.{type(backend).__name__}")
    if not served_by.startswith("projections."):
        problems.append(f"ari-core's get_backend answers with {served_by}, not the ledger")
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
