"""Every example in README.md and docs/*.md runs as written (issue 28, item 4), as
eventsourcing's ``docs_tests`` do: the examples are read out of the Markdown and run.

What is an example: a fenced block (its fence at the start of a line) in ``bash``, ``sh`` or
``shell`` (a script; it must exit 0), ``console`` (commands after ``$ ``, each followed by the
output it prints), or ``python`` (a script). Blocks in any other language (``json``, ``yaml``, ``text``, none) are pictures and
data, not examples.

How they run. Each document is one session, its examples in document order, each one a test
of its own (id ``file:line``); running one example runs the examples before it in its document
first. A session starts in an empty working directory that holds a link ``fixtures`` to the
checkout's ``fixtures/`` (the docs say "from a clone"); the programs are the venv's
(``ari-ledger``, ``python``); no ARI or Letta variable is set; ``COLUMNS=80``; ``HOME`` is an
empty directory of the session's and ``TMPDIR`` its ``/tmp`` (below). Shell variables,
exports and ``cd`` carry over from one example to the next, as in one terminal. Paths under
``/tmp`` are the session's own: ``/tmp/X`` in an example is ``SESSION/tmp/X``, and that
directory is printed back as ``/tmp`` before outputs are compared. So a document sets up what it
uses in a visible block (``cli.md``: ``ari-ledger demo /tmp/docs-demo`` and
``CKPT=/tmp/docs-demo/checkpoint``), and a reader who types the examples in order in a shell
sees what the document shows.

Expected output:

- console: the lines after a ``$ command`` up to the next ``$ `` are what it prints, stdout and
  stderr together. A command must exit 0 unless its expected output shows otherwise: a line
  ``exit N`` (from ``; echo "exit $?"``) or a line starting with ``error:`` or ``ERROR:``.
- python: a ``print(...)  # TEXT`` line expects that call to print TEXT.
- ``<!-- output -->`` before a fenced block makes the block the whole stdout of the example
  before it (for a python block whose output is shown below it; its stderr is not compared).

Placeholders, in expected output only:

- ``…`` alone on a line stands for any number of lines (also none);
- ``…`` inside a line stands for any text within that line (also none, also a printed ``…``);
- values that differ on every run are compared by their shape, not their value: a UUID, a
  64-hex-digit hash, a hex prefix cut with ``…`` (``8c68a04af23f…``), an ISO-8601 time, a
  compact stamp (``20261130T163336251583Z``) and a Unix time in seconds with a fraction
  (``1796056355.114163``) match any other of their kind. The docs show real values from one run.

Markers, an HTML comment on the last non-blank line before the fence:

- ``<!-- not run: REASON -->`` skips the example (it starts a server, needs ARI or the network,
  runs the whole suite, …); the skip names the reason, and the counts test lists every one;
- ``<!-- file: NAME -->`` writes the block to NAME in the working directory for the examples
  after it (a script they run);
- ``<!-- output -->``, above.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from difflib import unified_diff
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the venv's ari-ledger and python
SHELL_LANGS = {"bash", "sh", "shell"}
FLOOR = 45  # at least this many examples run: deleting or skipping examples is noticed
TIMEOUT = 600

FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not run|file|output)\s*:?\s*(?P<arg>.*?)\s*-->\s*$")
ELLIPSIS = "…"
SHAPES = [  # (pattern, token): values that differ on every run, compared by their shape
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b[0-9a-f]{4,63}…"), "<hex>…"),
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\b\d{8}T\d{6,12}Z\b"), "<stamp>"),
    (re.compile(r"\b1[7-9]\d{8}\.\d+"), "<unix time>"),
]
TMP_PATH = re.compile(r"(?<![\w./~-])/tmp(?=/|\b|$)")
RUN_TOOLS = ("jq", "curl", "zcat", "tar", "sha256sum")


@dataclass
class Example:
    doc: str  # the path relative to the checkout
    line: int  # of the opening fence
    lang: str
    text: str
    skip: str | None = None  # <!-- not run: REASON -->
    file: str | None = None  # <!-- file: NAME -->
    output: str | None = None  # the <!-- output --> block after it

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def parse(path: Path, doc: str | None = None) -> list[Example]:
    """The examples of one Markdown file, in order (``doc``: its name in test ids)."""
    doc = doc or str(path.relative_to(ROOT))
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, fence, lang = i, m["fence"], m["lang"].lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise ValueError(f"{doc}:{start + 1}: the fenced block is never closed")
        body = "\n".join(lines[start + 1 : end]) + "\n"
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        kind, arg = (marker["kind"], marker["arg"]) if marker else (None, "")
        i = end + 1
        if kind == "output":
            if not found or found[-1].output is not None:
                raise ValueError(f"{doc}:{start + 1}: <!-- output --> follows no example")
            found[-1].output = body
            continue
        if lang not in SHELL_LANGS | {"console", "python"}:
            if kind is not None:
                raise ValueError(f"{doc}:{start + 1}: a marker on a ```{lang} block, which is not an example")
            continue
        if kind == "not run" and not arg:
            raise ValueError(f"{doc}:{start + 1}: <!-- not run: REASON --> needs its reason")
        if kind == "file" and not arg:
            raise ValueError(f"{doc}:{start + 1}: <!-- file: NAME --> needs the name")
        found.append(
            Example(
                doc,
                start + 1,
                lang,
                body,
                skip=arg if kind == "not run" else None,
                file=arg if kind == "file" else None,
            )
        )
    return found


EXAMPLES = [example for path in DOCS for example in parse(path)]


# -- expected output ------------------------------------------------------------------------------


def shapes(text: str) -> str:
    for pattern, token in SHAPES:
        text = pattern.sub(token, text)
    return text


def _clean(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(piece) for piece in line.split(ELLIPSIS)) + r"\n")
    return re.compile("".join(parts))


def mismatch(expected: str, actual: str) -> str | None:
    """None when ``actual`` is what ``expected`` shows (placeholders allowed), else a diff."""
    want, got = _clean(shapes(expected)), _clean(shapes(actual))
    if _pattern(want).fullmatch("".join(line + "\n" for line in got)):
        return None
    return "\n".join(unified_diff(want, got, "expected (the doc)", "actual", lineterm="", n=2))


def shows_failure(expected: str) -> bool:
    return any(
        re.fullmatch(r"exit [1-9]\d*", line) or line.startswith(("error:", "ERROR:")) for line in _clean(expected)
    )


def commands(text: str) -> list[tuple[str, str]]:
    """A console block's ``(command, expected output)`` pairs; a ``\\`` at a line's end continues it."""
    pairs: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = [line[2:]]
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
            pairs.append(("\n".join(command), []))
        elif pairs:
            pairs[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"output before the first `$ ` command: {line!r}")
        i += 1
    if not pairs:
        raise ValueError("a console block without a `$ ` command (an output alone is ```text)")
    return [(command, "\n".join(out)) for command, out in pairs]


def print_expectations(source: str) -> dict[tuple[int, int], str]:
    """``(first line, last line)`` of each ``print(...)  # TEXT`` statement → TEXT."""
    found: dict[tuple[int, int], str] = {}
    start: int | None = None
    is_print = False
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT, tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NEWLINE:
            start, is_print = None, False
        elif start is None and tok.type not in skip:
            start, is_print = tok.start[0], tok.type == tokenize.NAME and tok.string == "print"
        elif tok.type == tokenize.COMMENT and is_print and start is not None:
            found[(start, tok.start[0])] = tok.string[1:].removeprefix(" ")
    return found


# a python example runs under this: print() also records what each line printed
PY_RUNNER = """\
import builtins, io, json, sys
path, record = sys.argv[1], sys.argv[2]
printed = []
real_print = builtins.print
def recording_print(*args, **kwargs):
    if kwargs.get("file") is None:
        buf = io.StringIO()
        real_print(*args, **{**kwargs, "file": buf})
        printed.append([sys._getframe(1).f_lineno, buf.getvalue()])
    real_print(*args, **kwargs)
builtins.print = recording_print
sys.argv = [path]
try:
    code = compile(open(path, encoding="utf-8").read(), path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path})
finally:
    with open(record, "w", encoding="utf-8") as f:
        json.dump(printed, f)
"""

# every shell snippet runs under this: the session's variables, exports and directory carry over
SH_PRELUDE = """\
set -a
. "$DOCS_STATE/env.sh"
cd "$(cat "$DOCS_STATE/pwd")"
__docs_save() {
  __docs_rc=$?
  set +a
  export -n PWD OLDPWD SHLVL _ __docs_rc 2>/dev/null
  export -p > "$DOCS_STATE/env.sh"
  pwd > "$DOCS_STATE/pwd"
  exit $__docs_rc
}
trap __docs_save EXIT
"""


# -- sessions -------------------------------------------------------------------------------------


@dataclass
class Session:
    """One document's examples, run in order in one working directory."""

    root: Path
    examples: list[Example]
    outcomes: list[str | None] = field(default_factory=list)  # None: it ran as shown

    def __post_init__(self) -> None:
        self.tmp, self.cwd, self.state, self.home = (self.root / n for n in ("tmp", "cwd", "state", "home"))
        for d in (self.tmp, self.cwd, self.state, self.home):
            d.mkdir(parents=True)
        (self.cwd / "fixtures").symlink_to(ROOT / "fixtures")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARI_", "LETTA_", "PYTEST_"))}
        env = {k: v for k, v in env.items() if not k.startswith("XDG_")}
        env.update(
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            COLUMNS="80",
            LC_ALL="C.UTF-8",
            TMPDIR=str(self.tmp),
            HOME=str(self.home),
        )
        env.pop("NO_COLOR", None)
        (self.state / "env.sh").write_text(
            "".join(f"export {k}={_sh_quote(v)}\n" for k, v in env.items() if re.fullmatch(r"[A-Za-z_]\w*", k))
        )
        (self.state / "pwd").write_text(str(self.cwd))
        (self.state / "pyrun.py").write_text(PY_RUNNER)

    def run_through(self, index: int) -> str | None:
        while len(self.outcomes) <= index:
            example = self.examples[len(self.outcomes)]
            earlier = [e.id for e, o in zip(self.examples, self.outcomes) if o is not None]
            outcome = self.run(example) if example.skip is None else None
            if outcome is not None and earlier:
                outcome += f"\n(examples before it in this document failed too: {', '.join(earlier)})"
            self.outcomes.append(outcome)
        return self.outcomes[index]

    def map_paths(self, text: str) -> str:
        return TMP_PATH.sub(lambda _: str(self.tmp), text)

    def unmap(self, text: str) -> str:
        return text.replace(str(self.tmp), "/tmp")

    def shell(self, script: str, name: str) -> tuple[int, str]:
        path = self.state / f"{name}.sh"
        path.write_text(SH_PRELUDE + script + "\n", encoding="utf-8")
        env = {"DOCS_STATE": str(self.state), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        proc = subprocess.run(
            ["bash", str(path)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            check=False,
        )
        return proc.returncode, self.unmap(proc.stdout.decode("utf-8", errors="replace"))

    def run(self, example: Example) -> str | None:
        """None when the example ran as the document shows, else what differed."""
        text = self.map_paths(example.text)
        name = f"line{example.line}"
        if example.file is not None:  # relative to where the examples before it left the shell
            target = Path((self.state / "pwd").read_text().strip()) / self.map_paths(example.file)
            target.write_text(example.text, encoding="utf-8")
            return None
        if example.lang in SHELL_LANGS:
            rc, out = self.shell("set -e\n" + text, name)
            if rc != 0:
                return f"the script exited {rc}:\n{out}"
            return self._compare_output(example, out)
        if example.lang == "python":
            source = self.state / f"{name}.py"
            source.write_text(text, encoding="utf-8")
            record, stderr = self.state / f"{name}.printed.json", self.state / f"{name}.stderr"
            rc, out = self.shell(f'python "$DOCS_STATE/pyrun.py" "{source}" "{record}" 2>"{stderr}"', name)
            if rc != 0:
                return f"the python example exited {rc}:\n{out}{self.unmap(stderr.read_text(errors='replace'))}"
            printed = json.loads(record.read_text()) if record.exists() else []
            for (first, last), want in print_expectations(example.text).items():
                got = "".join(self.unmap(text) for line, text in printed if first <= line <= last)
                if (diff := mismatch(want, got)) is not None:
                    return f"line {example.line + first} of the doc prints something else:\n{diff}"
            return self._compare_output(example, out)
        try:
            pairs = commands(example.text)
        except ValueError as e:
            return str(e)
        failures = []
        for n, (command, expected) in enumerate(pairs):
            rc, out = self.shell(self.map_paths(command), f"{name}-{n}")
            if rc != 0 and not shows_failure(expected):
                failures.append(f"$ {command}\nexited {rc} (the doc shows no failure):\n{out}")
            elif (diff := mismatch(expected, out)) is not None:
                failures.append(f"$ {command}\n{diff}")
        return "\n\n".join(failures) or None

    def _compare_output(self, example: Example, out: str) -> str | None:
        if example.output is None:
            return None
        diff = mismatch(example.output, out)
        return None if diff is None else f"its output differs from the <!-- output --> block:\n{diff}"


def _sh_quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


SESSIONS: dict[str, Session] = {}


@pytest.fixture
def session_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Session]:
    def get(doc: str) -> Session:
        if doc not in SESSIONS:
            root = tmp_path_factory.mktemp(re.sub(r"\W", "_", doc))
            SESSIONS[doc] = Session(root, [e for e in EXAMPLES if e.doc == doc])
        return SESSIONS[doc]

    return get


def _needs_missing_tool(example: Example) -> str | None:
    for tool in RUN_TOOLS:
        if re.search(rf"(?<![\w./-]){tool}\b", example.text) and shutil.which(tool) is None:
            return tool
    return None


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_runs_as_written(example: Example, session_for: Callable[[str], Session]) -> None:
    if example.skip is not None:
        pytest.skip(f"{example.id} not run: {example.skip}")
    if (tool := _needs_missing_tool(example)) is not None:
        pytest.skip(f"needs {tool}, which is not installed")
    session = session_for(example.doc)
    outcome = session.run_through(session.examples.index(example))
    if outcome is not None:
        pytest.fail(f"{example.id} does not run as written:\n{outcome}", pytrace=False)


def test_enough_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    skipped = [e for e in EXAMPLES if e.skip is not None]
    ran = len(EXAMPLES) - len(skipped)
    with capsys.disabled():
        print(f"\ndocs examples: {len(EXAMPLES)} found, {ran} run, {len(skipped)} not run")
        for e in skipped:
            print(f"  not run  {e.id}: {e.skip}")
    assert ran >= FLOOR, f"only {ran} examples of README.md and docs/ run (at least {FLOOR} did)"


def test_the_event_lines_shown_are_real_lines_of_this_version() -> None:
    """docs/events.md shows real lines, printed by ``ari-ledger log``: each decodes, its own hash
    checks, and it is of the schema version the log writes now."""
    from ledger.chain import decode_line
    from ledger.events import SCHEMA_VERSION

    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    lines = [m[1] for m in re.finditer(r"^```json\n(\{\"v\":.*\})\n```$", text, re.MULTILINE)]
    assert len(lines) >= 9, "docs/events.md shows a real line of every event type"
    for line in lines:
        event = decode_line(line.encode("utf-8"))
        assert event.v == SCHEMA_VERSION, f"seq {event.seq} ({event.type}) is a version-{event.v} line"


# -- the harness itself ---------------------------------------------------------------------------


def test_placeholders() -> None:
    assert mismatch("a\n…\nd\n", "a\nb\nc\nd\n") is None
    assert mismatch("a\n…\nd\n", "a\nd\n") is None
    assert mismatch("x = … s\n", "x = 1.5 s  \n\n") is None
    assert mismatch("head 8c68a04af23f…: seq 38\n", "head 0123456789ab…: seq 38\n") is None
    assert mismatch("id 01a22d4b-311f-793a-a617-1b8856593ca1\n", "id 01a234da-8329-7f49-8541-ddca8c297976\n") is None
    assert mismatch("a\nb\n", "a\nc\n") is not None
    assert mismatch("a\n", "a\nb\n") is not None  # nothing left over
    assert mismatch("seq 38\n", "seq 39\n") is not None
    assert mismatch("x …\n", "y 1\n") is not None


def test_parsing(tmp_path: Path) -> None:
    assert commands("$ a \\\n  b\nout 1\n\nout 2\n$ c\n") == [("a \\\n  b", "out 1\n\nout 2"), ("c", "")]
    with pytest.raises(ValueError, match="before the first"):
        commands("WARNING: just output\n")
    with pytest.raises(ValueError, match="without a `\\$ ` command"):
        commands("\n")
    assert shows_failure("error: no\n") and shows_failure("x\nexit 2\n") and not shows_failure("exit 0\n")
    source = 'x = 1\nprint(x)  # 1\nprint("# no")\nprint(\n    x,\n)  # 1\n'
    assert print_expectations(source) == {(2, 2): "1", (4, 6): "1"}
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- not run: a server -->\n```bash\nserve\n```\n\n```python\nprint(1)\n```\n"
        "prints\n\n<!-- output -->\n```\n1\n```\n```json\n{}\n```\n"
    )
    bash, python = parse(doc, "doc.md")
    assert (bash.id, bash.lang, bash.skip, bash.text) == ("doc.md:2", "bash", "a server", "serve\n")
    assert (python.id, python.skip, python.output) == ("doc.md:6", None, "1\n")
    doc.write_text("<!-- output -->\n```\n1\n```\n")
    with pytest.raises(ValueError, match="follows no example"):
        parse(doc, "doc.md")


def test_a_session_runs_examples_in_order_and_finds_what_differs(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```bash\nX=/tmp/x; mkdir $X; cd $X\n```\n"  # 0: a variable and a directory carry over
        '```console\n$ pwd; echo $X\n/tmp/x\n/tmp/x\n$ false; echo "exit $?"\nexit 1\n```\n'  # 1: ok
        "<!-- file: hello.py -->\n```python\nprint('hi')\n```\n"  # 2: written, not run
        "```console\n$ python hello.py\nho\n```\n"  # 3: wrong output
        "```python\nprint(1 + 1)  # 3\n```\n"  # 4: wrong print
        "```console\n$ false\n```\n"  # 5: fails, and the doc shows no failure
        "```bash\ntrue\nfalse\ntrue\n```\n"  # 6: a script stops at its first failure
    )
    session = Session(tmp_path / "session", parse(doc, "doc.md"))
    assert [session.run_through(i) for i in range(3)] == [None, None, None]
    assert (session.tmp / "x" / "hello.py").read_text() == "print('hi')\n"
    assert "-ho\n+hi" in (session.run_through(3) or "")
    assert "prints something else" in (session.run_through(4) or "")
    assert "exited 1 (the doc shows no failure)" in (session.run_through(5) or "")
    assert "the script exited 1" in (session.run_through(6) or "")
