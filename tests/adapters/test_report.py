"""The lineage report: escaping and structure of the HTML, then the real page in headless Chromium.

Chromium is driven over its DevTools protocol on ``--remote-debugging-pipe`` (NUL-framed JSON
on file descriptors 3 and 4), so the browser test needs only the standard library.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from projections.adapters.report import NODE_H, NODE_W, render_report

CHROMIUM = "/usr/bin/chromium"
HOSTILE = '</script><b>x</b> and "quotes" & <!-- comment'
ODD_ID = 'n8<"&>'
AUDITS = ("verified", "missing", "mismatch", "unhashed")


def _node(node_id: str, parent: str | None, depth: int, label: str, status: str, **extra: Any) -> dict:
    node = {
        "node_id": node_id,
        "parent_id": parent,
        "depth": depth,
        "label": label,
        "status": status,
        "headline_metric": {"name": "acc", "value": 0.5 + depth / 10},
        "memory_counts": {"experiment_result": 1, "note": 1},
        "claims": [],
        "entries": [
            {
                "entry_id": f"{node_id}-e1",
                "kind": "experiment_result",
                "text": f"result of {node_id}",
                "ts": "2025-01-01T00:00:00Z",
                "artifact_refs": [],
            },
        ],
    }
    node.update(extra)
    return node


def _claim(memory_id: str, grounded: bool, repro: str) -> dict:
    usable = grounded and repro != "rerun_failed"
    return {
        "memory_id": memory_id,
        "text": f"claim {memory_id}",
        "grounded": grounded,
        "repro_status": repro,
        "usable": usable,
    }


def nine_node_data() -> dict:
    """root → n1, n2 (failed), n3; n1 → n4, n5; n4 → n6 (best), n7 (failed); n3 → an odd id."""
    refs = [
        {
            "path": f"out/{audit}.json",
            "sha256": None if audit == "unhashed" else f"{i:x}" * 64,
            "role": "data_output",
            "audit": audit,
        }
        for i, audit in enumerate(AUDITS, start=10)
    ]
    hostile_entry = {
        "entry_id": "n2-e2",
        "kind": "failure_case",
        "text": HOSTILE,
        "ts": "2025-01-01T01:00:00Z",
        "artifact_refs": refs,
    }
    return {
        "title": 'Lineage of "run-7" <demo>',
        "checkpoint": "/ckpt/run-7",
        "as_of_seq": 412,
        "best_node": "n6",
        "best_lineage": ["n0", "n1", "n4", "n6"],
        "nodes": [
            _node("n0", None, 0, "draft", "success"),
            _node(
                "n1",
                "n0",
                1,
                "improve",
                "success",
                claims=[_claim("m1", True, "rerun_passed"), _claim("m2", False, "unverified")],
            ),
            _node(
                "n2",
                "n0",
                1,
                "debug",
                "failed",
                headline_metric=None,
                memory_counts={"failure_case": 2, "reflection": 1},
                claims=[_claim("m3", True, "rerun_failed")],
                entries=[
                    {
                        "entry_id": "n2-e1",
                        "kind": "reflection",
                        "text": "loss diverged at step 40",
                        "ts": "2025-01-01T00:30:00Z",
                        "artifact_refs": refs[:1],
                    },
                    hostile_entry,
                ],
            ),
            _node("n3", "n0", 1, "ablation", "unknown", claims=[_claim("m4", True, "paper_only_reproduced")]),
            _node("n4", "n1", 2, "improve", "success"),
            _node("n5", "n1", 2, "validation", "success"),
            _node(
                "n6",
                "n4",
                3,
                "improve",
                "success",
                claims=[_claim("m5", True, "rerun_passed"), _claim("m6", True, "unverified")],
            ),
            _node("n7", "n4", 3, "debug", "failed", entries=[]),
            _node(ODD_ID, "n3", 2, "other", "unknown", memory_counts={}),
        ],
    }


def random_tree_data(count: int, seed: int) -> dict:
    rng = random.Random(seed)
    nodes = [_node("r", None, 0, "draft", "success")]
    for i in range(1, count):
        parent = nodes[rng.randrange(len(nodes))]
        nodes.append(
            _node(
                f"r{i}",
                parent["node_id"],
                parent["depth"] + 1,
                rng.choice(["improve", "debug", "ablation"]),
                rng.choice(["success", "failed", "unknown"]),
            )
        )
    return {
        "title": "big",
        "checkpoint": "c",
        "as_of_seq": count,
        "best_node": None,
        "best_lineage": [],
        "nodes": nodes,
    }


class _Parsed(HTMLParser):
    """Start tags with their attributes, and the text of each <script>, as a browser would see them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def node_groups(self) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == "g" and "node" in (a.get("class") or "").split()]


def _positions(parsed: _Parsed) -> dict[str, tuple[float, float]]:
    out = {}
    for attrs in parsed.node_groups():
        x, y = re.fullmatch(r"translate\(([\d.]+) ([\d.]+)\)", attrs["transform"]).groups()
        out[attrs["data-node-id"]] = (float(x), float(y))
    return out


def test_exactly_one_node_group_per_node() -> None:
    data = nine_node_data()
    parsed = _Parsed(render_report(data))
    ids = [a["data-node-id"] for a in parsed.node_groups()]
    assert sorted(ids) == sorted(n["node_id"] for n in data["nodes"])
    best = [a["data-node-id"] for a in parsed.node_groups() if "best" in a["class"].split()]
    assert best == ["n6"]
    lineage = {a["data-node-id"] for a in parsed.node_groups() if "on-lineage" in a["class"].split()}
    assert lineage == {"n0", "n1", "n4", "n6"}
    statuses = {a["data-node-id"]: a["class"].split()[1] for a in parsed.node_groups()}
    assert statuses["n2"] == statuses["n7"] == "status-failed"
    assert all(a["tabindex"] == "0" for a in parsed.node_groups())


def test_no_external_reference_except_the_svg_namespace() -> None:
    html = render_report(nine_node_data())
    without_ns = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http://" not in without_ns and "https://" not in without_ns
    parsed = _Parsed(html)
    for tag, attrs in parsed.tags:
        for name in ("src", "href", "xlink:href"):
            value = attrs.get(name)
            assert value is None or value.startswith("data:"), (tag, name, value)
    [csp] = [a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv")]
    assert csp.startswith("default-src 'none';")


def test_hostile_text_appears_only_escaped() -> None:
    data = nine_node_data()
    html = render_report(data)
    parsed = _Parsed(html)
    assert "<b>x</b>" not in html and "</script><b>" not in html and "<!-- comment" not in html
    assert html.count("</script") == len(parsed.scripts) == 2
    assert "b" not in {tag for tag, _ in parsed.tags}
    assert ODD_ID not in html and 'data-node-id="n8&lt;&quot;&amp;&gt;"' in html
    assert '"run-7" <demo>' not in html and "&quot;run-7&quot; &lt;demo&gt;" in html
    [text] = [text for attrs, text in parsed.scripts if attrs.get("type") == "application/json"]
    assert "<" not in text
    details = {d["id"]: d for d in json.loads(text)}
    assert set(details) == {n["node_id"] for n in data["nodes"]}
    assert details["n2"]["entries"][1]["text"] == HOSTILE
    assert [r["audit"] for r in details["n2"]["entries"][1]["refs"]] == list(AUDITS)


def test_layout_is_tidy_and_deterministic() -> None:
    data = nine_node_data()
    html = render_report(data)
    assert render_report(data) == html
    pos = _positions(_Parsed(html))
    assert pos["n1"][0] == (pos["n4"][0] + pos["n5"][0]) / 2
    assert pos["n4"][0] == (pos["n6"][0] + pos["n7"][0]) / 2
    assert pos["n0"][0] == (pos["n1"][0] + pos["n3"][0]) / 2
    rows = {n["depth"]: pos[n["node_id"]][1] for n in data["nodes"]}
    assert all(pos[n["node_id"]][1] == rows[n["depth"]] for n in data["nodes"])
    assert rows[0] < rows[1] < rows[2] < rows[3]


def test_two_hundred_nodes_are_laid_out_without_overlap() -> None:
    data = random_tree_data(200, seed=7)
    parsed = _Parsed(render_report(data))
    pos = _positions(parsed)
    assert len(parsed.node_groups()) == len(pos) == 200
    rows: dict[float, list[float]] = {}
    for x, y in pos.values():
        rows.setdefault(y, []).append(x)
    for xs in rows.values():
        xs.sort()
        assert all(b - a >= NODE_W for a, b in pairwise(xs))
    assert all(b - a >= NODE_H for a, b in pairwise(sorted(rows)))
    children: dict[str, list[float]] = {}
    for n in data["nodes"]:
        if n["parent_id"] is not None:
            children.setdefault(n["parent_id"], []).append(pos[n["node_id"]][0])
    for parent, xs in children.items():
        assert abs(pos[parent][0] - (min(xs) + max(xs)) / 2) < 0.11
    [svg] = [a for t, a in parsed.tags if t == "svg"]
    assert svg["viewbox"] == f"0 0 {svg['width']} {svg['height']}"
    assert max(x for x, _ in pos.values()) + NODE_W < float(svg["width"])


def test_every_node_is_drawn_even_with_a_missing_parent_or_a_cycle() -> None:
    nodes = [
        _node("a", "ghost", 1, "draft", "success"),
        _node("b", "c", 1, "draft", "success"),
        _node("c", "b", 1, "draft", "success"),
        _node("d", "d", 0, "draft", "success"),
    ]
    data = {
        "title": "t",
        "checkpoint": "c",
        "as_of_seq": 1,
        "best_node": "zz",
        "best_lineage": ["ghost", "a"],
        "nodes": nodes,
    }
    parsed = _Parsed(render_report(data))
    assert sorted(a["data-node-id"] for a in parsed.node_groups()) == ["a", "b", "c", "d"]
    assert not [a for a in parsed.node_groups() if "best" in a["class"].split()]


def test_duplicate_node_ids_are_refused() -> None:
    data = nine_node_data()
    data["nodes"].append(_node("n3", "n0", 1, "draft", "success"))
    with pytest.raises(ValueError, match="duplicate node_id"):
        render_report(data)


# --- the page in a real browser -------------------------------------------------------------

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)
_ERROR_EVENTS = ("Runtime.exceptionThrown", "Runtime.consoleAPICalled", "Log.entryAdded")


class Page:
    """One tab of a headless Chromium, driven over the DevTools pipe with flat sessions."""

    def __init__(self, chromium: str, profile: Path) -> None:
        self.log = profile / "chromium.log"
        to_chrome, self._out = os.pipe()
        self._in, from_chrome = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4; the shell moves the
        # pipe ends there from stdin/stdout, where subprocess can place them safely.
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    'exec "$@" 3<&0 4>&1 </dev/null >&2',
                    "sh",
                    chromium,
                    *FLAGS,
                    f"--user-data-dir={profile}",
                    "about:blank",
                ],
                stdin=to_chrome,
                stdout=from_chrome,
                stderr=log,
                start_new_session=True,
            )
        os.close(to_chrome)
        os.close(from_chrome)
        self._buf = b""
        self._last_id = 0
        self.events: list[dict] = []
        self.session: str | None = None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=1600, height=900, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, timeout: float = 15, **params: Any) -> dict:
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data) :]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == self._last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, event: str, timeout: float = 15) -> dict:
        for i, seen in enumerate(self.events):
            if seen.get("method") == event:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline, event)
            if message.get("method") == event:
                return message
            self.events.append(message)

    def _read(self, deadline: float, waiting_for: str) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError(
                    f"no answer to {waiting_for}; {self.log} ends with:\n"
                    + self.log.read_text(errors="replace")[-2000:]
                )
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise EOFError(f"Chromium closed the DevTools pipe; see {self.log}")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", url=path.as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def node(self, node_id: str) -> str:
        """A JS expression for the tree's node group with this id (ids may hold any character)."""
        return f"[...document.querySelectorAll('g.node')].find(g => g.dataset.nodeId === {json.dumps(node_id)})"

    def click_node(self, node_id: str) -> None:
        x, y = self.evaluate(
            f"(() => {{ const g = {self.node(node_id)}; g.scrollIntoView({{block: 'center', inline: 'center'}});"
            " const r = g.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def press_enter_on_node(self, node_id: str) -> None:
        self.evaluate(f"{self.node(node_id)}.focus()")
        assert self.evaluate("document.activeElement.dataset.nodeId") == node_id
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions since the last open()."""
        self.evaluate("0")  # a round trip, so events emitted before now have been read
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                found.append(json.dumps(params["args"])[:500])
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append(params["entry"]["text"])
        return found

    def close(self) -> None:
        self.session = None
        with contextlib.suppress(OSError, RuntimeError, TimeoutError, EOFError):  # closing anyway below
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self._in)
        os.close(self._out)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    chromium = shutil.which(CHROMIUM)
    if chromium is None:
        reason = f"{CHROMIUM} not found (Debian: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the browser tests", pytrace=False)
        pytest.skip(reason)
    browser = Page(chromium, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


def _open_report(page: Page, data: dict, path: Path) -> None:
    path.write_text(render_report(data), encoding="utf-8")
    page.open(path)


def test_browser_draws_every_node_and_a_click_shows_its_entries(page: Page, tmp_path: Path) -> None:
    data = nine_node_data()
    _open_report(page, data, tmp_path / "report.html")
    ids = page.evaluate("[...document.querySelectorAll('svg g.node')].map(g => g.dataset.nodeId)")
    assert sorted(ids) == sorted(n["node_id"] for n in data["nodes"])
    assert "result of n2" not in page.evaluate("document.getElementById('panel').textContent")

    page.click_node("n2")
    panel = page.evaluate("document.getElementById('panel').innerText")
    assert page.evaluate("document.querySelector('#panel h2').textContent") == "n2"
    assert "loss diverged at step 40" in panel and HOSTILE in panel and "rerun_failed" in panel
    assert page.evaluate("document.querySelectorAll('#panel b, #panel script').length") == 0
    audits = page.evaluate(
        "[...document.querySelectorAll('#panel .entry')[1].querySelectorAll('.audit')]"
        ".map(a => [a.textContent, getComputedStyle(a).backgroundColor])"
    )
    assert [a for a, _ in audits] == list(AUDITS)
    assert len({colour for _, colour in audits}) == 4
    assert page.evaluate(f"{page.node('n2')}.classList.contains('selected')")

    shot = tmp_path / "report.png"
    page.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.errors() == []


def test_browser_keyboard_enter_opens_a_node(page: Page, tmp_path: Path) -> None:
    _open_report(page, nine_node_data(), tmp_path / "report.html")
    page.press_enter_on_node(ODD_ID)
    assert page.evaluate("document.querySelector('#panel h2').textContent") == ODD_ID
    page.press_enter_on_node("n6")
    assert page.evaluate("document.querySelector('#panel h2').textContent") == "n6"
    assert "claim m5" in page.evaluate("document.getElementById('panel').innerText")
    assert page.errors() == []


def test_browser_two_hundred_nodes_scroll_and_stay_clickable(page: Page, tmp_path: Path) -> None:
    data = random_tree_data(200, seed=11)
    _open_report(page, data, tmp_path / "big.html")
    assert page.evaluate("document.querySelectorAll('svg g.node').length") == 200
    assert page.evaluate("(t => t.scrollWidth > t.clientWidth)(document.getElementById('tree'))")
    last = data["nodes"][-1]["node_id"]
    page.click_node(last)
    assert page.evaluate("document.querySelector('#panel h2').textContent") == last
    assert f"result of {last}" in page.evaluate("document.getElementById('panel').innerText")
    assert page.errors() == []
