"""Client memory (issue 30, item 1): the peak RSS of one client process beside ARI's own client's.

    python -m bench.client_bench [--nodes 111] [--per-node 10] [--queries 200] [--letta] [--ari GIT_DIR]

One workload, each run in a fresh interpreter (so a peak is its own, read from ``VmHWM``): open
the backend of a fresh checkpoint, write ``--nodes`` x ``--per-node`` entries one by one through
``add_memory`` (each node writing its own, as ARI's writer does), then ``--queries`` calls of
``search_memory`` from random nodes (8 random words; the node and its ancestors; limit 5).

- ours, the embedded default (no Letta): held to ARI's client (1.0 x);
- ARI's client: ARI's own ``ari_skill_memory`` (its ``LettaBackend`` over letta-client), taken
  from a clone of ARI (``--ari``: a git directory or a checkout). With ``--letta`` it runs the
  workload against a Letta 0.16.7 server (brought up if none runs; its agent is made beforehand
  with the project's offline embeddings, which ARI's ``ensure_agent`` then finds by name).
  Without ``--letta`` there is no server to call: the baseline is ARI's client imported and
  built (``get_backend`` and its letta-client), no call made, a lower bound of its peak.
  Without a clone of ARI, the baseline is ARI's plain calls made with letta-client
  (``passages.create`` one by one, ``passages.search`` with ``top_k = max(200, limit * 40)``);
- ours with Letta configured (``--letta``): held to 1.5 x ARI's client.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

from projections.adapters.cli.framework import Parser

from .common import Figure, report
from .projection_bench import VOCAB, build_tree, text

LIMIT = 5
ARI_CLONE = Path("/work/.mirror/kotama7+ARI/repo")  # the default --ari, when present
ARI_PACKAGE = "ari-skill-memory/src"

_PEAK = """
def _peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
"""

OURS = (
    _PEAK
    + """
import json, sys, time
from projections.api import clear_backend_cache, get_backend
work = json.load(open(sys.argv[1]))
backend = get_backend(sys.argv[2])
for node, text in work["writes"]:
    backend.add_memory(node, text, current_node=node)
times = []
for query, scope in work["queries"]:
    started = time.perf_counter()
    backend.search_memory(query, scope, work["limit"])
    times.append(time.perf_counter() - started)
engine = backend.engine_name
clear_backend_cache()  # what atexit does: the push thread is drained and joined
print(json.dumps({"peak_mb": _peak_mb(), "times": times, "engine": engine}))
"""
)

ARI = (
    _PEAK
    + """
import json, os, sys, time
sys.path.insert(0, sys.argv[3])
from ari_skill_memory.backends import get_backend
work = json.load(open(sys.argv[1]))
backend = get_backend(sys.argv[2])
backend._ensure_client()  # letta-client imported and built, as the first call does
times = []
if work["calls"]:
    for node, text in work["writes"]:
        os.environ["ARI_CURRENT_NODE_ID"] = node  # ARI's copy-on-write check reads it
        assert backend.add_memory(node, text)["ok"]
    for query, scope in work["queries"]:
        started = time.perf_counter()
        backend.search_memory(query, scope, work["limit"])
        times.append(time.perf_counter() - started)
backend._access.flush_and_close()
print(json.dumps({"peak_mb": _peak_mb(), "times": times, "engine": "ARI's LettaBackend"}))
"""
)

PLAIN = (
    _PEAK
    + """
import json, os, sys, time
from letta_client import Letta
work = json.load(open(sys.argv[1]))
client = Letta(base_url=os.environ["LETTA_BASE_URL"], api_key=os.environ["LETTA_API_KEY"] or None, timeout=60.0)
agent = sys.argv[3]
sep = "\\n<<<ARI_META>>>\\n"
for node, text in work["writes"]:
    client.agents.passages.create(agent_id=agent, text=text + sep + json.dumps({"node_id": node}))
times = []
for query, scope in work["queries"]:
    started = time.perf_counter()
    found = client.agents.passages.search(agent_id=agent, query=query, top_k=max(200, work["limit"] * 40))
    allowed = set(scope)
    rows = [json.loads(r.content.rpartition(sep)[2]) for r in found.results]
    [r for r in rows if r["node_id"] in allowed][: work["limit"]]
    times.append(time.perf_counter() - started)
print(json.dumps({"peak_mb": _peak_mb(), "times": times, "engine": "letta-client, ARI's plain calls"}))
"""
)


def workload(nodes: int, per_node: int, queries: int, seed: int = 7) -> dict[str, Any]:
    """The writes (node, text) in the order made and the queries (text, scope)."""
    rng = random.Random(seed)
    tree = build_tree(nodes, rng)
    writes = [(node, text(rng, i * per_node + k)) for i, node in enumerate(tree) for k in range(per_node)]
    picks = [rng.choice(list(tree)) for _ in range(queries)]
    asks = [(" ".join(rng.choices(VOCAB, k=8)), [*tree[node], node]) for node in picks]
    return {"writes": writes, "queries": asks, "limit": LIMIT}


def run(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter with ``env``; its last stdout line, as JSON."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"benchmark child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ari_source(clone: Path | None, into: Path) -> Path | None:
    """ARI's ``ari-skill-memory/src`` from a checkout or a git directory, else None."""
    if clone is None:
        return None
    if (clone / ARI_PACKAGE / "ari_skill_memory").is_dir():
        return clone / ARI_PACKAGE
    archive = subprocess.run(
        ["git", "-C", str(clone), "archive", "HEAD", ARI_PACKAGE], capture_output=True, check=False
    )
    if archive.returncode:
        return None
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / ARI_PACKAGE


def p50_ms(times: list[float]) -> str:
    return f"search p50 {statistics.median(times) * 1000:.2f} ms" if times else "no searches"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=111)
    parser.add_argument("--per-node", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--letta", action="store_true", help="run ARI's client and ours on a Letta server")
    parser.add_argument("--ari", type=Path, default=ARI_CLONE if ARI_CLONE.exists() else None, help="a clone of ARI")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="client-bench-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("LETTA_", "ARI_"))}
    figures: list[Figure] = []
    try:
        load = workload(args.nodes, args.per_node, args.queries)
        (work / "work.json").write_text(json.dumps({**load, "calls": args.letta}))
        ours = run(OURS, base_env, str(work / "work.json"), str(work / "ours"))
        print(f"ours, embedded default ({ours['engine']}): {ours['peak_mb']:.1f} MB, {p50_ms(ours['times'])}")

        letta_env = dict(base_env)
        if args.letta:
            from projections import letta_server

            server = letta_server.server() or letta_server.up()
            letta_env |= {
                "LETTA_BASE_URL": server.base_url,
                "LETTA_API_KEY": server.api_key,
                "ARI_MEMORY_EMBED_URL": server.embedding_url,
            }
        source = ari_source(args.ari, work / "ari")
        ari_ckpt = work / "ari-ckpt"
        ari_ckpt.mkdir()
        agent = _ari_agent(letta_env, ari_ckpt) if args.letta else None
        try:
            if source is not None:
                what = "ARI's client (ari_skill_memory.LettaBackend)" + (
                    "" if args.letta else ", imported and built, no call made (no server: a lower bound)"
                )
                env = letta_env | {"ARI_MEMORY_BACKEND": "letta", "ARI_MEMORY_ACCESS_LOG": "on"}
                ari = run(ARI, env, str(work / "work.json"), str(ari_ckpt), str(source))
            elif args.letta:
                what = "ARI's plain calls with letta-client (no clone of ARI)"
                ari = run(PLAIN, letta_env, str(work / "work.json"), str(ari_ckpt), str(agent))
            else:
                raise SystemExit("no clone of ARI (--ari) and no --letta: nothing to measure ARI's client by")
        finally:
            if agent is not None:
                _delete_agents(letta_env, ari_ckpt)
        print(f"{what}: {ari['peak_mb']:.1f} MB, {p50_ms(ari['times'])}")
        figures.append(
            Figure(
                f"peak RSS, ours embedded (no Letta), {len(load['writes']):,} writes + {args.queries} searches",
                ours["peak_mb"],
                "MB",
                ari["peak_mb"],
                f"<= 1.0 x {what} ({ari['peak_mb']:.1f} MB)",
                ours["peak_mb"] <= ari["peak_mb"],
            )
        )
        if args.letta:
            env = letta_env | {"ARI_MEMORY_SEARCH_ENGINE": "letta"}
            try:
                with_letta = run(OURS, env, str(work / "work.json"), str(work / "ours-letta"))
            finally:
                _delete_agents(letta_env, work / "ours-letta")
            print(
                f"ours, Letta configured ({with_letta['engine']}): {with_letta['peak_mb']:.1f} MB, "
                f"{p50_ms(with_letta['times'])}"
            )
            figures.append(
                Figure(
                    "peak RSS, ours with Letta configured, same workload",
                    with_letta["peak_mb"],
                    "MB",
                    ari["peak_mb"],
                    f"<= 1.5 x {what} ({1.5 * ari['peak_mb']:.1f} MB)",
                    with_letta["peak_mb"] <= 1.5 * ari["peak_mb"],
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(figures)


def _with_env(env: dict[str, str]) -> dict[str, str | None]:
    """Set ``env``'s Letta variables in this process; what they were."""
    keys = ("LETTA_BASE_URL", "LETTA_API_KEY", "ARI_MEMORY_EMBED_URL")
    before = {k: os.environ.get(k) for k in keys}
    for k in keys:
        if k in env:
            os.environ[k] = env[k]
    return before


def _restore_env(before: dict[str, str | None]) -> None:
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _ari_agent(env: dict[str, str], ckpt: Path) -> str:
    """ARI's agent for ``ckpt``, made as ARI's ``ensure_agent`` makes it but embedding with the
    project's offline endpoint (ARI's default handle needs Letta's hosted embeddings)."""
    from projections.engines.letta.server import agent_name, default_embedding_config, make_client
    from projections.models.embedder import get_embedder

    before = _with_env(env)
    try:
        embedder = get_embedder()
        agent = make_client(timeout=60.0).agents.create(
            name=agent_name(ckpt),
            model="letta/letta-free",
            embedding_config=default_embedding_config(embedder.name, embedder.dim),
            include_base_tools=False,
            memory_blocks=[{"label": label, "value": ""} for label in ("persona", "human", "ari_context")],
        )
        return str(agent.id)
    finally:
        _restore_env(before)


def _delete_agents(env: dict[str, str], ckpt: Path) -> None:
    """Delete the agent of ``ckpt`` (with its archive and blocks)."""
    from projections.engines.letta.server import agent_name, delete_agent, make_client

    before = _with_env(env)
    try:
        delete_agent(make_client(timeout=60.0), agent_name(ckpt))
    finally:
        _restore_env(before)


if __name__ == "__main__":
    raise SystemExit(main())
