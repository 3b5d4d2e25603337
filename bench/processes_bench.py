"""Many processes, one checkpoint (issue 17): what coordinating writers costs.

    python -m bench.processes_bench [--seconds 6] [--dir DIR]

Durable single appends with 1, 2 and 4 writer processes on one checkpoint (spawned, each through
ARI's ``get_backend`` + ``add_memory``, as ARI's hooks and its MCP server write), and the p50 of
``search_memory`` in another process while they write. Every figure is printed beside the
single-process figure measured in the same run: appends funnel through one lock and one disk, so
the aggregate rate of P writers is held to at least 0.9 x one writer's (coordination costs at most
10 %); a search reads what the writers add, so its p50 is reported beside the idle one.
Each run ends as a user checks: ``verify`` passes and every acknowledged append is in the log once.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from projections.adapters.cli.framework import Parser

from .common import Figure, report

COORDINATION = 0.9  # aggregate appends/s of P writers >= this x one writer's
WRITERS = (1, 2, 4)


def _writer(ckpt: str, who: int, start: float, seconds: float, out: multiprocessing.Queue) -> None:
    os.environ["ARI_CHECKPOINT_DIR"] = ckpt
    from projections.api import get_backend

    backend = get_backend(ckpt)
    node = f"writer_{who}"
    while time.time() < start:
        time.sleep(0.001)
    done = 0
    while time.time() < start + seconds:
        if backend.add_memory(node, f"writer {who} entry {done}: " + "stencil halo " * 20, {}, current_node=node)["ok"]:
            done += 1
    out.put((who, done))


def _searcher(ckpt: str, start: float, seconds: float, out: multiprocessing.Queue) -> None:
    from projections.api import get_backend

    backend = get_backend(ckpt)
    backend.search_memory("warm up", ["root"], 5)
    while time.time() < start:
        time.sleep(0.001)
    lat = []
    while time.time() < start + seconds:
        t = time.perf_counter()
        backend.search_memory("temporal blocking of the halo exchange", ["root", "writer_0"], 5)
        lat.append((time.perf_counter() - t) * 1000)
        time.sleep(0.01)  # ARI searches at node start, not in a loop
    out.put(("search", statistics.median(lat) if lat else float("nan")))


def run(work: Path, writers: int, seconds: float, *, search: bool) -> tuple[int, float | None]:
    """Total acknowledged appends of ``writers`` processes in ``seconds``, and the search p50 (ms)."""
    ckpt = work / f"p{writers}{'s' if search else ''}"
    from projections.api import MemoryBackend

    seed = MemoryBackend(ckpt)
    for i in range(200):
        seed.add_memory("root", f"root entry {i}: baseline stencil " * 4, {}, current_node="root")
    seed.close()
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    start = time.time() + 4.0  # every process has imported and opened before the clock starts
    procs = [ctx.Process(target=_writer, args=(str(ckpt), w, start, seconds, out)) for w in range(writers)]
    if search:
        procs.append(ctx.Process(target=_searcher, args=(str(ckpt), start, seconds, out)))
    for p in procs:
        p.start()
    results = dict(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join()
    total = sum(v for k, v in results.items() if k != "search")
    _check(ckpt, 200 + total)
    return total, results.get("search")


def _check(ckpt: Path, expected: int) -> None:
    from ledger import Ledger

    with Ledger.open_readonly(ckpt) as ledger:
        report_ = ledger.verify()
        texts = [e.body.get("text") for e in ledger.events() if e.type == "memory_added"]
    if not report_.ok or len(texts) != expected or len(set(texts)) != len(texts):
        raise SystemExit(f"{ckpt}: verify {report_.summary()}; {len(texts)} entries, expected {expected} distinct")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="how long each configuration writes")
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    parser.add_argument("--raw", action="store_true", help="also print the raw figures as JSON")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ari-ledger-procs-", dir=args.dir))
    raw: dict[str, object] = {}
    try:
        rates = {p: run(work, p, args.seconds, search=False)[0] / args.seconds for p in WRITERS}
        _idle, idle_p50 = run(work, 0, args.seconds, search=True)
        searched = {p: run(work, p, args.seconds, search=True)[1] for p in WRITERS}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    one = rates[1]
    figures = [Figure("durable appends/s, 1 writer process", one, "appends/s", None, "the baseline", True)]
    for p in WRITERS[1:]:
        figures.append(
            Figure(
                f"durable appends/s, {p} writer processes together (per process {rates[p] / p:,.0f})",
                rates[p],
                "appends/s",
                one,
                f">= {COORDINATION} x 1 writer",
                rates[p] >= COORDINATION * one,
            )
        )
    assert idle_p50 is not None
    figures.append(Figure("search_memory p50, no writer", idle_p50, "ms", None, "the baseline", True))
    for p in WRITERS:
        value = searched[p]
        assert value is not None
        figures.append(
            Figure(f"search_memory p50 while {p} process(es) write", value, "ms", idle_p50, "reported", True)
        )
    raw.update(rates=rates, idle_p50=idle_p50, searched=searched)
    if args.raw:
        print(json.dumps(raw))
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
