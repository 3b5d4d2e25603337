"""The command registry of ``ari-ledger``, its exit codes and output helpers.

Exit codes scripts can trust: 0 success; 1 a check ran and found a problem (verify, audit,
an alarm in status); 2 the command could not run (bad arguments, missing checkpoint, bad
input) — always as one ``error:`` line, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from ledger import InvalidInput
from ledger.errors import cut_echoes, one_line

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130

Command = Callable[[argparse.Namespace], int]
Setup = Callable[[argparse.ArgumentParser], None]
Check = Callable[[argparse.Namespace], None]
COMMANDS: dict[str, tuple[Command, Setup, str]] = {}

# What every command may end with; a command adds (or words more precisely) its own.
OK_HELP = "success"
ERROR_HELP = (
    "the command could not run: bad arguments or input, not a checkpoint, a file that cannot be read (one error: line)"
)
INTERRUPTED_HELP = "interrupted (Ctrl-C)"


def no_color() -> bool:
    """https://no-color.org: any non-empty ``NO_COLOR`` turns colour off."""
    return os.environ.get("NO_COLOR", "") != ""


def make_console(**kwargs: Any) -> Console:
    """Every console the command line makes: ``NO_COLOR`` honoured, markup and highlighting
    off (ids and claims contain [brackets])."""
    from rich.console import Console

    options: dict[str, Any] = {"highlight": False, "soft_wrap": True, "markup": False, "no_color": no_color()}
    return Console(**(options | kwargs))


console: Console  # the console commands print tables and status lines on: made on first use (below)


def __getattr__(name: str) -> Any:
    """``console`` is made, and rich imported (~40 ms), when a command first prints with it,
    not at import: a command that prints no table or status line never loads rich."""
    if name == "console":
        made = globals()["console"] = make_console()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def honour_no_color() -> None:
    """``console`` as ``NO_COLOR`` says now (``main``, before a command runs, not at import);
    a console not made yet reads it when it is made."""
    made = globals().get("console")
    if made is not None:
        made.no_color = no_color()


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The epilog as written (the exit-code table), and each option's default after its help
    unless the help already says it or there is nothing to say (None, False, [])."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, [], argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)"
        return text


def exit_codes_epilog(codes: Mapping[int, str]) -> str:
    """``exit codes:`` and one entry per code; long lines wrap, indented under the text."""
    lines = ["exit codes:"]
    for code, text in sorted(codes.items()):
        head, indent = f"  {code}  ", " " * 5
        for i, line in enumerate(text.strip().splitlines()):
            first = head if i == 0 else indent
            lines.extend(textwrap.wrap(line.strip(), width=92, initial_indent=first, subsequent_indent=indent))
    return "\n".join(lines) + "\n"


def command(
    name: str,
    help: str,
    setup: Setup = lambda parser: None,
    *,
    exit_codes: Mapping[int, str] | None = None,
    check: Check | None = None,
) -> Callable[[Command], Command]:
    """Register ``fn`` as the sub-command ``name``; ``setup`` adds its arguments.

    ``exit_codes`` (code -> what it means) extends the codes every command has (0, 2, 130) and
    ends the command's ``--help``; ``check`` validates the parsed arguments before ``fn`` runs
    (raise :class:`InvalidInput`: one ``error:`` line, exit 2)."""
    codes = {EXIT_OK: OK_HELP, EXIT_ERROR: ERROR_HELP, EXIT_INTERRUPTED: INTERRUPTED_HELP} | dict(exit_codes or {})

    def full_setup(parser: argparse.ArgumentParser) -> None:
        setup(parser)
        parser.formatter_class = HelpFormatter
        parser.epilog = exit_codes_epilog(codes)

    def register(fn: Command) -> Command:
        def run(args: argparse.Namespace) -> int:
            if check is not None:
                check(args)
            return fn(args)

        run.__doc__, run.__name__ = fn.__doc__, fn.__name__
        COMMANDS[name] = (run, full_setup, help)
        return fn

    return register


AS_OF_HELP = "as of this seq: the log up to and including it (0 or more, at most the last seq)"


def as_of_arg(parser: argparse.ArgumentParser) -> None:
    """``--as-of SEQ``, the one spelling of a log position (checked by :func:`check_seq`)."""
    parser.add_argument("--as-of", type=int, default=None, metavar="SEQ", help=AS_OF_HELP)


# The two ideas a node id selects, each with its one name and help text:
# ``--as NODE`` reads memory the way NODE does (its lineage); ``--node NODE`` keeps NODE's own records.
AS_HELP = "read as this node: its recorded lineage, root → NODE, is what the command sees (see `ari-ledger tree`)"
NODE_HELP = "only this node's own records (what it wrote or read), not its ancestors' (see `ari-ledger tree`)"


def as_arg(parser: argparse.ArgumentParser, *, required: bool, more: str = "") -> None:
    """``--as NODE`` (``--node`` before, kept working, hidden, with a note). Not required by
    argparse (the old spelling would fail it): ``required`` commands check it themselves."""
    text = AS_HELP + (more or ("; required" if required else ""))
    parser.add_argument("--as", dest="as_node", default=None, metavar="NODE", help=text)
    parser.add_argument("--node", dest="as_node", action=Deprecated, new="--as")


def node_arg(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--node NODE``: only that node's own records."""
    parser.add_argument("--node", default=None, metavar="NODE", help=NODE_HELP)


def need_as(args: argparse.Namespace, otherwise: str = "") -> str:
    """The ``--as`` node of a command that cannot run without one (``otherwise``: what else would do)."""
    if args.as_node is None:
        raise InvalidInput("--as", f"missing: name the node to read as (see `ari-ledger tree`){otherwise}")
    return str(args.as_node)


EXPERIMENTS_HELP = (
    "experiments root, <run_id>/<node_id>/ with each node's node_report.json and artifacts "
    "(default: the first of CKPT/experiments, CKPT/../experiments, ARI's CKPT/../../experiments that exists)"
)


def experiments_arg(parser: argparse.ArgumentParser) -> None:
    """``--experiments DIR``: one help text everywhere; one the user names must exist (:func:`check_dir`)."""
    parser.add_argument("--experiments", default=None, metavar="DIR", help=EXPERIMENTS_HELP)


def output_arg(parser: argparse.ArgumentParser, what: str, *, default: str | None = None) -> None:
    """``-o/--output FILE``: the one spelling of the file a command writes."""
    parser.add_argument("-o", "--output", default=default, metavar="FILE", help=what)


STDOUT = "-"  # ``-o -``: the command's file goes to standard output


@contextlib.contextmanager
def output_file(output: str, field: str = "--output") -> Iterator[Path]:
    """The file a command writes for ``-o OUTPUT``, checked before any work (its folder exists,
    it is no file of a checkpoint's memory: :func:`ledger.maintenance.bundle.check_output_path`). ``-o -``
    yields a private temporary file whose bytes go to standard output once the command has
    written it whole (a failed command writes nothing there)."""
    from ledger.maintenance.bundle import check_output_path

    if output != STDOUT:
        check_output_path(Path(output), field)
        yield Path(output)
        return
    with tempfile.TemporaryDirectory(prefix="ari-ledger-out-") as tmp:
        path = Path(tmp) / "output"
        yield path
        with open(path, "rb") as data:
            shutil.copyfileobj(data, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def said(output: str) -> TextIO:
    """Where a command's own lines go: standard error when its file goes to standard output."""
    return sys.stderr if output == STDOUT else sys.stdout


def deprecated(old: str, new: str) -> None:
    """One line on stderr: ``old`` still works (scripts keep running), ``new`` is its name now."""
    print(f"note: {old} is deprecated; use {new} (it means the same)", file=sys.stderr)


class Deprecated(argparse.Action):
    """An old spelling of an option: hidden from ``--help``, stores into the new option's
    ``dest`` and says so on stderr (``new``: the spelling to use)."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        kwargs.setdefault("default", None)
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        deprecated(option_string or self.option_strings[0], self.new)
        setattr(namespace, self.dest, values)


def check_dir(value: str | None, field: str) -> None:
    """A directory the user named must exist (None: not given, found by the command)."""
    if value is not None and not os.path.isdir(value):
        raise InvalidInput(field, f"{value!r} is not a directory")


def shorten(message: str, argv: list[str]) -> str:
    """``message`` as one line (:func:`ledger.errors.one_line`), each argument it echoes longer
    than :data:`ECHO_LIMIT` cut (:func:`ledger.errors.cut_echoes`)."""
    return one_line(cut_echoes(message, argv))


class Parser(argparse.ArgumentParser):
    """argparse's parser whose own errors read as every other error of the command line: one
    ``error:`` line naming the argument, the reason and the command that helps, exit 2 (no
    usage block: ``--help`` prints it)."""

    def error(self, message: str) -> NoReturn:
        _refuse(parser_error(message, self.prog))

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """argparse's, with an argument no command takes named against the command given (argparse
        says it against the top level's usage)."""
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            name = getattr(parsed, "command", None)
            _refuse(f"{unknown[0]}: unknown argument; see `{self.prog}{f' {name}' if name else ''} --help`")
        return parsed


def _refuse(line: str) -> NoReturn:
    """A parser's refusal: one ``error:`` line, exit 2."""
    print(f"error: {one_line(line)}", file=sys.stderr)
    raise SystemExit(EXIT_ERROR)


_REQUIRED = re.compile(r"the following arguments are required: (?P<names>.+)")
_CHOICE = re.compile(r"argument (?P<arg>\S+): invalid choice: (?P<value>.+?) \(choose from (?P<choices>.+)\)")
_TYPE = re.compile(r"argument (?P<arg>\S+): invalid (?P<type>\w+) value: (?P<value>.+)")
_ARGUMENT = re.compile(r"argument (?P<arg>\S+): (?P<reason>.+)")
_AMBIGUOUS = re.compile(r"ambiguous option: (?P<arg>\S+) could match (?P<matches>.+)")
_TYPE_WORDS = {"int": "a whole number", "float": "a number"}


def parser_error(message: str, prog: str) -> str:
    """argparse's error ``message`` of the parser ``prog`` as ``FIELD: REASON`` (the library's
    :class:`InvalidInput` form) with the command that helps."""
    see = f"see `{prog} --help`"
    if m := _REQUIRED.fullmatch(message):
        names = [_long(n) for n in m["names"].split(", ")]
        if names == ["COMMAND"]:
            return f"COMMAND: missing; name one of the commands `{prog} --help` lists"
        also = f" (and {', '.join(names[1:])})" if len(names) > 1 else ""
        return f"{names[0]}: missing, it is required{also}; {see}"
    if m := _CHOICE.fullmatch(message):
        arg, value = _long(m["arg"]), m["value"]
        choices = [c.strip("'") for c in m["choices"].split(", ")]
        near = difflib.get_close_matches(value.strip("'"), choices, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        if arg == "COMMAND":
            return f"COMMAND: unknown command {value}{hint}; `{prog} --help` lists the commands"
        return f"{arg}: {value} is not one of {', '.join(choices)}{hint}; {see}"
    if m := _TYPE.fullmatch(message):
        kind = _TYPE_WORDS.get(m["type"], f"a valid {m['type']} value")
        return f"{_long(m['arg'])}: expected {kind}, got {m['value']}"
    if m := _ARGUMENT.fullmatch(message):
        return f"{_long(m['arg'])}: {m['reason']}; {see}"
    if m := _AMBIGUOUS.fullmatch(message):
        return f"{m['arg']}: ambiguous option, it could be {m['matches']}"
    return f"{message}; {see}"


def _long(arg: str) -> str:
    """An argument as an error names it: its long option (``-o/--output`` → ``--output``)."""
    return arg.split("/")[-1]


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters, cut after a whole word with ``…``
    (a first word longer than ``width`` alone is cut inside)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    head = text[: width - 1]
    if text[width - 1] != " " and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


def counts(data: Mapping[str, object]) -> str:
    """``{"verified": 49, "missing": 1}`` as people read it: ``49 verified, 1 missing``."""
    return ", ".join(f"{n} {name}" for name, n in data.items()) or "none"


def file_facts(path: str | os.PathLike[str], data: bytes) -> dict[str, Any]:
    """What ``--json`` says of a file a command wrote: its path, size and sha256."""
    return {"path": os.fspath(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def emit(data: object, file: TextIO | None = None) -> None:
    """Print data as one JSON document (on ``file``, default standard output)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=file or sys.stdout)


# What every command calls its checkpoint argument: the checkpoint, never the ledger's own folder in it.
CHECKPOINT_HELP = "checkpoint directory (ARI's checkpoints/<run_id>/, the folder that holds memory_ledger/)"


def checkpoint_arg(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument("checkpoint", help=CHECKPOINT_HELP)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON")
