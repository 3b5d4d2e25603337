"""Lineage report: one self-contained HTML page showing the experiment tree as inline SVG.

Reviewers open it from a copied checkpoint, often offline, so the page carries its own
CSS, SVG and script and loads nothing (its Content-Security-Policy forbids any fetch and
runs only the script and style it was rendered with). Every string from the ledger is
untrusted: it is escaped into markup, and the click-through details are embedded as JSON
in which ``<``, ``>`` and ``&`` are \\u-escaped, so no text can close the script tag.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from html import escape
from itertools import pairwise
from typing import Any, get_args

from projections.api import AuditStatus

NODE_W = 224
NODE_H = 112
GAP_X = 28
GAP_Y = 64
MARGIN = 24
SLOT = NODE_W + GAP_X

_STATUSES = ("success", "failed", "unknown")
_AUDITS = get_args(AuditStatus)  # the CSS classes of artifact rows
_KIND_WORDS = {
    "experiment_result": "result",
    "failure_case": "failure",
    "reproducibility_event": "repro",
}


def render_report(data: Mapping[str, Any]) -> str:
    """One complete HTML document for the lineage projection ``data``.

    ``data`` holds title, checkpoint, as_of_seq, best_node, best_lineage and nodes (each with
    status, headline metric, memory counts, claims and entries with artifact refs). Node ids
    must be unique; parents that are missing or form a loop make their nodes extra roots.
    """
    nodes = list(data["nodes"])
    by_id: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        node_id = str(node["node_id"])
        if node_id in by_id:
            raise ValueError(f"duplicate node_id in report data: {node_id!r}")
        by_id[node_id] = node
    roots, tree = _forest(nodes)
    place = _layout(roots, tree)

    lineage = [str(n) for n in data.get("best_lineage") or [] if str(n) in by_id]
    best = data.get("best_node")
    best = str(best) if best is not None and str(best) in by_id else None
    svg = _svg(by_id, tree, place, set(lineage), set(pairwise(lineage)), best)
    details = [_details(node) for node in nodes]
    return _page(data, len(nodes), best, svg, details)


def _forest(nodes: Sequence[Mapping[str, Any]]) -> tuple[list[str], dict[str, list[str]]]:
    """Roots and child lists in input order, every node reached exactly once.

    A node whose parent is absent, or whose parent chain loops, would otherwise vanish
    from the picture; such nodes become roots instead, first come first served.
    """
    ids = [str(n["node_id"]) for n in nodes]
    parent = {str(n["node_id"]): n.get("parent_id") for n in nodes}
    children: dict[str, list[str]] = {i: [] for i in ids}
    for i in ids:
        p = None if parent[i] is None else str(parent[i])
        if p in children and p != i:
            children[p].append(i)
    tree: dict[str, list[str]] = {i: [] for i in ids}
    roots: list[str] = []
    seen: set[str] = set()
    natural = [i for i in ids if parent[i] is None or str(parent[i]) not in children]
    for start in natural + ids:
        if start in seen:
            continue
        roots.append(start)
        seen.add(start)
        stack = [start]
        while stack:
            node = stack.pop()
            for child in children[node]:
                if child not in seen:
                    seen.add(child)
                    tree[node].append(child)
                    stack.append(child)
    return roots, tree


def _layout(roots: list[str], tree: dict[str, list[str]]) -> dict[str, tuple[float, int]]:
    """Tidy top-down layout: (x in slots, depth) for every node.

    Sibling subtrees are packed left to right as close as their contours allow (one slot
    apart at every depth they share) and each parent is centred over its first and last
    child, so the picture depends only on the tree and its child order. Iterative, so a
    long chain of nodes cannot exhaust Python's recursion limit.
    """
    kids: dict[str | None, list[str]] = {None: roots}
    kids.update(tree)
    postorder: list[str | None] = []
    stack: list[tuple[str | None, bool]] = [(None, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            postorder.append(node)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(kids[node]))

    rel: dict[str, float] = {}
    contour: dict[str | None, list[tuple[float, float]]] = {}
    for node in postorder:
        merged: list[list[float]] = []
        offsets: list[float] = []
        for child in kids[node]:
            sub = contour.pop(child)
            shift = max((m[1] - c[0] + 1 for m, c in zip(merged, sub)), default=0.0)
            for depth, (left, right) in enumerate(sub):
                if depth < len(merged):
                    merged[depth][1] = right + shift
                else:
                    merged.append([left + shift, right + shift])
            offsets.append(shift)
        centre = (offsets[0] + offsets[-1]) / 2 if offsets else 0.0
        for child, shift in zip(kids[node], offsets):
            rel[child] = shift - centre
        contour[node] = [(0.0, 0.0)] + [(left - centre, right - centre) for left, right in merged]

    place: dict[str, tuple[float, int]] = {}
    walk: list[tuple[str, float, int]] = [(r, rel[r], 0) for r in roots]
    while walk:
        node, x, depth = walk.pop()
        place[node] = (x, depth)
        walk.extend((child, x + rel[child], depth + 1) for child in tree[node])
    left = min((x for x, _ in place.values()), default=0.0)
    return {node: (x - left, depth) for node, (x, depth) in place.items()}


def _svg(
    by_id: Mapping[str, Mapping[str, Any]],
    tree: dict[str, list[str]],
    place: dict[str, tuple[float, int]],
    on_lineage: set[str],
    lineage_edges: set[tuple[str, str]],
    best: str | None,
) -> str:
    """The tree as SVG: edges first so boxes sit on top, best-lineage edges over plain ones."""

    def corner(node_id: str) -> tuple[float, float]:
        x, depth = place[node_id]
        return MARGIN + x * SLOT, MARGIN + depth * (NODE_H + GAP_Y)

    plain: list[str] = []
    bold: list[str] = []
    for parent, children in tree.items():
        px, py = corner(parent)
        for child in children:
            cx, cy = corner(child)
            x1, y1, x2, y2 = px + NODE_W / 2, py + NODE_H, cx + NODE_W / 2, cy
            ym = (y1 + y2) / 2
            on = (parent, child) in lineage_edges
            (bold if on else plain).append(
                f'<path class="edge{" lineage" if on else ""}" '
                f'd="M{x1:.1f} {y1:.1f}C{x1:.1f} {ym:.1f} {x2:.1f} {ym:.1f} {x2:.1f} {y2:.1f}"/>'
            )
    groups = [_node_svg(by_id[n], *corner(n), n in on_lineage, n == best) for n in by_id]
    width = MARGIN * 2 + max((x for x, _ in place.values()), default=0) * SLOT + NODE_W
    height = MARGIN * 2 + (max((d for _, d in place.values()), default=0) + 1) * (NODE_H + GAP_Y) - GAP_Y
    return (
        f'<svg id="tree-svg" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="group" '
        f'aria-label="Experiment tree">'
        f'<defs><clipPath id="node-clip"><rect width="{NODE_W - 6}" height="{NODE_H}"/></clipPath></defs>'
        f'<g class="edges">{"".join(plain + bold)}</g>'
        f'<g class="nodes">{"".join(groups)}</g></svg>'
    )


def _node_svg(node: Mapping[str, Any], x: float, y: float, on_lineage: bool, best: bool) -> str:
    """One node box: id, label, status, headline metric, memory counts and claim badges."""
    node_id = str(node["node_id"])
    status = _status(node)
    label = str(node.get("label") or "other")
    metric = _metric(node.get("headline_metric"))
    counts = _counts(node.get("memory_counts") or {})
    classes = f"node status-{status}" + (" on-lineage" if on_lineage else "") + (" best" if best else "")
    if any(c.get("proof") == "fails" for c in node.get("claims") or []):
        classes += " proof-failed"
    tip = f"{node_id} — {label}, {status}"
    tip += (f", {metric}" if metric else "") + (f"; {counts}" if counts else "")
    tip += f" — {node['failure']}" if status == "failed" and node.get("failure") else ""
    halo = (
        f'<rect class="halo" x="-5" y="-5" width="{NODE_W + 10}" height="{NODE_H + 10}" rx="13"/>'
        if on_lineage or best
        else ""
    )
    best_tag = (
        f'<g class="best-tag" transform="translate({NODE_W - 50} 6)"><rect width="42" height="17" rx="8.5"/>'
        f'<text x="21" y="12.5">BEST</text></g>'
        if best
        else ""
    )
    return (
        f'<g class="{classes}" data-node-id="{escape(node_id)}" transform="translate({x:.1f} {y:.1f})" '
        f'tabindex="0" role="button" aria-label="{escape(tip)}">'
        f"<title>{escape(tip)}</title>{halo}"
        f'<rect class="box" width="{NODE_W}" height="{NODE_H}" rx="9"/>'
        f'<g clip-path="url(#node-clip)">'
        f'<text class="nid" x="10" y="20">{escape(_clip(node_id, 18 if best else 25))}</text>'
        f'<text class="label" x="10" y="39">{escape(_clip(f"{label} · {status}", 32))}</text>'
        f'<text class="metric{"" if metric else " none"}" x="10" y="57">'
        f"{escape(_clip(metric or 'no headline metric', 30))}</text>"
        f'<text class="counts{"" if counts else " none"}" x="10" y="75">'
        f"{escape(_clip(counts or 'no memory', 36))}</text>"
        f"{_badges(node.get('claims') or [])}</g>{best_tag}</g>"
    )


def _badges(claims: Sequence[Mapping[str, Any]]) -> str:
    """Small pills counting the node's claims by grounding and by rerun outcome."""
    grounded = sum(1 for c in claims if c.get("grounded"))
    repro = [c.get("repro_status") for c in claims]
    tallies = [
        ("grounded", "grnd", grounded, "grounded in hashed artifacts"),
        ("ungrounded", "ungr", len(claims) - grounded, "not grounded in an artifact"),
        ("passed", "pass", repro.count("rerun_passed"), "rerun passed"),
        ("rerun-failed", "fail", repro.count("rerun_failed"), "rerun failed"),
        ("proof-failed", "✗ prove", sum(c.get("proof") == "fails" for c in claims), "failed ari-ledger prove"),
    ]
    out, x = [], 10.0
    for cls, word, count, meaning in tallies:
        if not count:
            continue
        text = f"{word} {count}"
        width = 10 + 6.2 * len(text)
        out.append(
            f'<g class="badge b-{cls}" transform="translate({x:.1f} 87)">'
            f"<title>{count} claim{'s' if count != 1 else ''} {meaning}</title>"
            f'<rect width="{width:.1f}" height="17" rx="8.5"/>'
            f'<text x="{width / 2:.1f}" y="12.5">{text}</text></g>'
        )
        x += width + 5
    return "".join(out)


def _details(node: Mapping[str, Any]) -> dict[str, Any]:
    """What the side panel shows for a node, pre-formatted so the script stays small."""
    return {
        "id": str(node["node_id"]),
        "label": str(node.get("label") or "other"),
        "status": _status(node),
        "failure": str(node.get("failure") or ""),
        "metric": _metric(node.get("headline_metric")),
        "counts": _counts(node.get("memory_counts") or {}),
        "claims": [
            {
                "memory_id": str(c.get("memory_id", "")),
                "text": str(c.get("text", "")),
                "grounded": bool(c.get("grounded")),
                "repro": str(c.get("repro_status") or "unverified"),
                "usable": bool(c.get("usable")),
                "proof": str(c.get("proof") or ""),
                "why": [str(w) for w in c.get("proof_failures") or []]
                + [str(x.get("text", "")) for x in c.get("exclusions") or [] if isinstance(x, Mapping)],
            }
            for c in node.get("claims") or []
        ],
        "entries": [
            {
                "id": str(e.get("entry_id", "")),
                "kind": str(e.get("kind", "")),
                "text": str(e.get("text", "")),
                "ts": str(e.get("ts", "")),
                "refs": [_ref(r) for r in e.get("artifact_refs") or []],
            }
            for e in node.get("entries") or []
        ],
    }


def _ref(ref: Mapping[str, Any]) -> dict[str, Any]:
    sha = ref.get("sha256")
    audit = str(ref.get("audit", "unhashed"))
    return {
        "path": str(ref.get("path", "")),
        "role": str(ref.get("role", "")),
        "sha": None if sha is None else str(sha),
        "audit": audit,
        "audit_class": audit if audit in _AUDITS else "unhashed",
    }


def _status(node: Mapping[str, Any]) -> str:
    status = node.get("status")
    return status if status in _STATUSES else "unknown"


def _metric(metric: Mapping[str, Any] | None) -> str | None:
    """``name=value`` with four significant digits, or None when the node has no metric."""
    if not metric:
        return None
    value = metric.get("value")
    shown = f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    return f"{metric.get('name', '')}={shown}"


def _counts(counts: Mapping[str, Any]) -> str:
    """``3 result · 1 failure``: most frequent kinds first; among equals, free-text notes last."""
    pairs = [(int(n), _KIND_WORDS.get(str(k), str(k).replace("_", " "))) for k, n in counts.items() if n]
    pairs.sort(key=lambda p: (-p[0], p[1] == "note", p[1]))
    return " · ".join(f"{n} {word}" for n, word in pairs)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_for_script(value: Any) -> str:
    """JSON that is inert inside <script>: no text in it can end the element or open a comment."""
    raw = json.dumps(value, separators=(",", ":"))
    return raw.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def _page(data: Mapping[str, Any], count: int, best: str | None, svg: str, details: list) -> str:
    title = escape(str(data.get("title") or "Lineage report"))
    checkpoint = escape(str(data.get("checkpoint", "")))
    as_of = escape(str(data.get("as_of_seq", "")))
    best_html = f" · best node <code>{escape(best)}</code>" if best else " · no best node"
    csp = (
        f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>{title}</h1>"
        f'<p class="meta">checkpoint <code>{checkpoint}</code> · as of seq <strong>{as_of}</strong> · '
        f"{count} node{'s' if count != 1 else ''}{best_html}"
        ' · <button type="button" id="fit">Fit to width</button></p>'
        f"{_LEGEND}</header>"
        f'<main><div id="tree">{svg}</div>'
        '<aside id="panel" aria-live="polite"><p class="hint">Select a node (click, or Tab then Enter) '
        "to see its memory entries and artifact audits.</p></aside></main>"
        f'<script type="application/json" id="node-details">{_json_for_script(details)}</script>'
        f"<script>{_JS}</script></body></html>\n"
    )


_LEGEND = (
    '<ul class="legend">'
    '<li><span class="sw status-success"></span>success</li>'
    '<li><span class="sw status-failed"></span>failed</li>'
    '<li><span class="sw status-unknown"></span>unknown</li>'
    '<li><span class="ln"></span>best lineage</li>'
    '<li><span class="tag">BEST</span>best node</li>'
    '<li><span class="pill b-grounded">grnd</span>grounded claims</li>'
    '<li><span class="pill b-ungrounded">ungr</span>ungrounded</li>'
    '<li><span class="pill b-passed">pass</span>rerun passed</li>'
    '<li><span class="pill b-rerun-failed">fail</span>rerun failed</li>'
    '<li>artifacts: <span class="audit audit-verified">verified</span>'
    '<span class="audit audit-mismatch">mismatch</span>'
    '<span class="audit audit-missing">missing</span>'
    '<span class="audit audit-unhashed">unhashed</span></li>'
    "</ul>"
)

_CSS = """
*{box-sizing:border-box}
html,body{height:100%;margin:0}
body{display:flex;flex-direction:column;font:14px/1.45 system-ui,"DejaVu Sans","Liberation Sans",sans-serif;color:#202124;background:#f6f7f9}
header{padding:10px 18px 8px;background:#fff;border-bottom:1px solid #dadce0}
h1{margin:0 0 2px;font-size:20px}
.meta{margin:0 0 6px;color:#5f6368}
code{font-family:"DejaVu Sans Mono","Liberation Mono",monospace;font-size:12.5px;background:#f1f3f4;padding:0 4px;border-radius:4px;overflow-wrap:anywhere}
button{font:inherit;font-size:12px;padding:1px 8px;border:1px solid #c4c7cc;border-radius:5px;background:#fff;cursor:pointer}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:0;padding:0;list-style:none;font-size:12px;color:#3c4043}
.legend li{display:flex;align-items:center;gap:5px}
.sw{display:inline-block;width:16px;height:12px;border-radius:3px;border:2px solid}
.sw.status-success{background:#e6f4ea;border-color:#2e7d32}
.sw.status-failed{background:#fce8e6;border-color:#c5221f}
.sw.status-unknown{background:#f1f3f4;border-color:#80868b}
.ln{display:inline-block;width:22px;height:4px;background:#1a56c4;border-radius:2px}
.tag{background:#f9ab00;color:#202124;font-weight:700;font-size:10px;padding:0 6px;border-radius:8px}
.pill{font-size:10.5px;font-weight:600;padding:0 6px;border-radius:8px;border:1px solid}
main{flex:1;display:flex;min-height:0}
#tree{flex:1;overflow:auto;min-width:0}
#tree svg{display:block}
#tree svg.fit{width:100%;height:auto}
#panel{width:420px;flex:none;overflow:auto;background:#fff;border-left:1px solid #dadce0;padding:12px 16px}
@media (max-width:900px){main{flex-direction:column}#panel{width:auto;border-left:0;border-top:1px solid #dadce0;max-height:45vh}}
.hint{color:#5f6368}
.edge{fill:none;stroke:#a0a6ad;stroke-width:1.6}
.edge.lineage{stroke:#1a56c4;stroke-width:4}
.node{cursor:pointer;outline:none}
.node .box{stroke-width:2}
.node.status-success .box{fill:#e6f4ea;stroke:#2e7d32}
.node.status-failed .box{fill:#fce8e6;stroke:#c5221f}
.node.status-unknown .box{fill:#f1f3f4;stroke:#80868b}
.node .halo{fill:none;stroke:#1a56c4;stroke-width:3}
.node.best .halo{stroke:#f9ab00;stroke-width:4}
.node:hover .box{stroke-width:3}
.node:focus-visible .box,.node.selected .box{stroke:#202124;stroke-width:3.5}
.node text{font-size:12px;fill:#202124}
.node .nid{font-weight:700;font-size:13px;font-family:"DejaVu Sans Mono","Liberation Mono",monospace}
.node .label{fill:#3c4043}
.node .metric{font-family:"DejaVu Sans Mono","Liberation Mono",monospace}
.node .counts{font-size:11px;fill:#3c4043}
.node .none{fill:#9aa0a6;font-style:italic}
.best-tag rect{fill:#f9ab00}
.best-tag text{font-size:10px;font-weight:700;text-anchor:middle}
.badge text{font-size:10.5px;font-weight:600;text-anchor:middle}
.badge rect{stroke-width:1}
.b-grounded rect,.pill.b-grounded{fill:#fff;stroke:#137333;border-color:#137333;color:#137333}
.b-grounded text{fill:#137333}
.b-ungrounded rect,.pill.b-ungrounded{fill:#fff;stroke:#80868b;border-color:#80868b;color:#5f6368;stroke-dasharray:3 2;border-style:dashed}
.b-ungrounded text{fill:#5f6368}
.b-passed rect,.pill.b-passed{fill:#137333;stroke:#137333;background:#137333;border-color:#137333;color:#fff}
.b-passed text{fill:#fff}
.b-rerun-failed rect,.pill.b-rerun-failed{fill:#c5221f;stroke:#c5221f;background:#c5221f;border-color:#c5221f;color:#fff}
.b-rerun-failed text{fill:#fff}
.audit{display:inline-block;font-size:11px;font-weight:600;padding:0 6px;margin-right:3px;border-radius:8px;color:#fff}
.audit-verified{background:#137333}
.audit-mismatch{background:#c5221f}
.audit-missing{background:#e8710a}
.audit-unhashed{background:#80868b}
#panel h2{margin:0;font-size:17px;overflow-wrap:anywhere}
#panel h3{margin:14px 0 6px;font-size:14px;border-bottom:1px solid #eee}
.sub{margin:2px 0 6px;color:#5f6368}
.status{font-weight:700}
.status.status-success{color:#137333}
.status.status-failed{color:#c5221f}
.status.status-unknown{color:#5f6368}
.claim,.entry{border:1px solid #e3e5e8;border-radius:7px;padding:6px 9px;margin:0 0 8px}
.claim.proof-fails{border-color:#c5221f;background:#fce8e6}
.node.proof-failed .box{stroke:#c5221f;stroke-width:3}
.b-proof-failed rect{fill:#c5221f}
.why{margin:2px 0 0 14px;color:#c5221f;font-size:12px}
.entry-head{display:flex;gap:8px;align-items:baseline;flex-wrap:wrap}
.kind{font-weight:700;font-size:12px;background:#e8f0fe;color:#1a56c4;padding:0 7px;border-radius:8px}
.ts,.mid{color:#5f6368;font-size:12px}
.text{margin:4px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.chip{display:inline-block;font-size:11px;padding:0 6px;margin-right:4px;border-radius:8px;background:#f1f3f4;color:#3c4043}
.chip.good{background:#e6f4ea;color:#137333}
.chip.bad{background:#fce8e6;color:#c5221f}
table.refs{width:100%;border-collapse:collapse;font-size:12px;margin-top:4px}
.refs th{text-align:left;color:#5f6368;font-weight:600;border-bottom:1px solid #eee}
.refs td{padding:2px 4px 2px 0;vertical-align:top;overflow-wrap:anywhere}
.refs .sha{font-family:"DejaVu Sans Mono","Liberation Mono",monospace}
"""

_JS = """
"use strict";
(() => {
  const details = new Map(JSON.parse(document.getElementById("node-details").textContent).map((d) => [d.id, d]));
  const svg = document.getElementById("tree-svg");
  const panel = document.getElementById("panel");
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };
  const chip = (text, tone) => el("span", "chip" + (tone ? " " + tone : ""), text);
  let selected = null;

  function refsTable(refs) {
    const table = el("table", "refs");
    const head = table.createTHead().insertRow();
    for (const h of ["path", "role", "sha256", "audit"]) head.appendChild(el("th", null, h));
    const body = table.createTBody();
    for (const r of refs) {
      const row = body.insertRow();
      row.appendChild(el("td", null, r.path));
      row.appendChild(el("td", null, r.role));
      const sha = el("td", "sha", r.sha === null ? "—" : r.sha.slice(0, 12));
      if (r.sha !== null) sha.title = r.sha;
      row.appendChild(sha);
      const audit = el("td");
      audit.appendChild(el("span", "audit audit-" + r.audit_class, r.audit));
      row.appendChild(audit);
    }
    return table;
  }

  function show(group) {
    const d = details.get(group.dataset.nodeId);
    if (!d) return;
    if (selected) selected.classList.remove("selected");
    selected = group;
    group.classList.add("selected");
    const parts = [el("h2", null, d.id)];
    const sub = el("p", "sub");
    sub.append(d.label + " · ", el("span", "status status-" + d.status, d.status));
    if (d.metric) sub.append(" · " + d.metric);
    parts.push(sub);
    if (d.failure) parts.push(el("p", "why", d.failure));
    if (d.counts) parts.push(el("p", "sub", d.counts));

    parts.push(el("h3", null, "Claims (" + d.claims.length + ")"));
    for (const c of d.claims) {
      const box = el("div", c.proof ? "claim proof-" + c.proof : "claim");
      box.appendChild(el("div", "text", c.text));
      box.append(
        chip(c.grounded ? "grounded" : "ungrounded", c.grounded ? "good" : null),
        chip(c.repro, c.repro === "rerun_failed" ? "bad" : (c.repro === "unverified" ? null : "good")),
        chip(c.usable ? "usable" : "not usable", c.usable ? "good" : "bad"));
      if (c.proof) box.append(chip("prove: " + c.proof, c.proof === "holds" ? "good" : "bad"));
      box.append(el("span", "mid", c.memory_id));
      for (const why of c.why) box.appendChild(el("div", "why", why));
      parts.push(box);
    }
    if (!d.claims.length) parts.push(el("p", "hint", "No claims."));

    parts.push(el("h3", null, "Entries (" + d.entries.length + ")"));
    for (const e of d.entries) {
      const box = el("div", "entry");
      const head = el("div", "entry-head");
      head.append(el("span", "kind", e.kind), el("span", "ts", e.ts), el("span", "mid", e.id));
      box.append(head, el("div", "text", e.text));
      if (e.refs.length) box.appendChild(refsTable(e.refs));
      parts.push(box);
    }
    if (!d.entries.length) parts.push(el("p", "hint", "No entries."));
    panel.replaceChildren(...parts);
    panel.scrollTop = 0;
  }

  svg.addEventListener("click", (ev) => {
    const group = ev.target.closest("g.node");
    if (group) show(group);
  });
  svg.addEventListener("keydown", (ev) => {
    const group = ev.target.closest("g.node");
    if (group && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      show(group);
    }
  });
  const fit = document.getElementById("fit");
  fit.addEventListener("click", () => {
    fit.textContent = svg.classList.toggle("fit") ? "Actual size" : "Fit to width";
  });
  const start = svg.querySelector("g.node.best") || svg.querySelector("g.node");
  if (start) start.scrollIntoView({block: "nearest", inline: "center"});
})();
"""
