"""``completion bash|zsh``: a shell completion script generated from the command registry.

Nothing is written by hand per command: every command of :data:`framework.COMMANDS` is set up
on a throwaway parser and its options, their values and its positionals become the script, so
a new command or option completes the day it is registered. What a value completes to:

- ``choices`` (``bench``'s benchmarks, ``letta up|down|status``) and the vocabularies a value
  is checked against (``--kind``, ``--min-evidence``): those words;
- a checkpoint, ``--experiments``, a ``DIR``: directories; a bundle, ``-o FILE``, a ``FILE``:
  files;
- anything else (a node id, a query, a number): nothing is offered.

Options hidden from ``--help`` (old spellings) are not offered, but a word after one is known
to be its value, not a positional.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field

from ledger.vocabulary import KINDS
from projections.adapters.cli.framework import COMMANDS, EXIT_OK, command
from projections.models.verdicts import EVIDENCE

SHELLS = ("bash", "zsh")
PROG = "ari-ledger"

# Values checked against a vocabulary rather than argparse ``choices`` (free labels are allowed too).
VOCABULARIES: dict[str, tuple[str, ...]] = {"kind": tuple(KINDS), "min_evidence": tuple(EVIDENCE)}
DIRS = {"checkpoint", "dir", "experiments", "home"}  # by dest
FILES = {"bundle", "output", "source", "context", "out"}


@dataclass
class Arg:
    """One option or positional as the completion sees it."""

    options: list[str]  # empty for a positional
    name: str
    help: str
    kind: str  # "dir", "file", "words" or "none" (a flag has kind "flag")
    words: tuple[str, ...] = ()
    hidden: bool = False
    repeat: bool = False
    optional: bool = False  # a positional that may be left out
    rest: bool = False  # a positional taking every word left


@dataclass
class Command:
    name: str
    help: str
    args: list[Arg] = field(default_factory=list)

    @property
    def options(self) -> list[Arg]:
        return [a for a in self.args if a.options]

    @property
    def positionals(self) -> list[Arg]:
        return [a for a in self.args if not a.options]


def _kind(action: argparse.Action) -> tuple[str, tuple[str, ...]]:
    if action.nargs == 0:
        return "flag", ()
    if action.choices is not None:
        return "words", tuple(str(c) for c in action.choices)
    if action.dest in VOCABULARIES:
        return "words", VOCABULARIES[action.dest]
    if action.metavar == "DIR" or action.dest in DIRS:
        return "dir", ()
    if action.metavar == "FILE" or action.dest in FILES:
        return "file", ()
    return "none", ()


def commands() -> list[Command]:
    """Every registered command, set up on a fresh parser, as the completion sees it."""
    found = []
    for name, (_fn, setup, help) in COMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"{PROG} {name}", add_help=True)
        setup(parser)
        cmd = Command(name, help)
        for action in parser._actions:
            kind, words = _kind(action)
            cmd.args.append(
                Arg(
                    options=list(action.option_strings),
                    name=(action.metavar if isinstance(action.metavar, str) else None) or action.dest,
                    help=" ".join((action.help or "").split()) if action.help != argparse.SUPPRESS else "",
                    kind=kind,
                    words=words,
                    hidden=action.help == argparse.SUPPRESS,
                    repeat=isinstance(action, argparse._AppendAction),
                    optional=action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE),
                    rest=action.nargs in (argparse.REMAINDER, argparse.ZERO_OR_MORE),
                )
            )
        found.append(cmd)
    return found


# --- bash ------------------------------------------------------------------------------------

_BASH_MAIN = r"""
# The completion itself: the command is the first word that is not an option; the words after
# it are walked to tell options, their values and positionals apart.
_ari_ledger() {
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" word="" expect="" i=1 npos=0
    local _ari_ledger_opts="" _ari_ledger_valued="" _ari_ledger_kind=none
    COMPREPLY=()
    while (( i < COMP_CWORD )); do
        word="${COMP_WORDS[i]}"
        if [[ "$word" != -* ]]; then cmd="$word"; break; fi
        (( i++ ))
    done
    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=( $(compgen -W "-h --help --version" -- "$cur") )
        else
            COMPREPLY=( $(compgen -W "$_ari_ledger_commands" -- "$cur") )
        fi
        return 0
    fi
    _ari_ledger_spec "$cmd" || return 0
    for (( i = i + 1; i < COMP_CWORD; i++ )); do
        word="${COMP_WORDS[i]}"
        [[ "$word" == "=" ]] && continue  # --opt=value: bash splits the word at =
        if [[ -n "$expect" ]]; then expect=""; continue; fi
        case "$word" in
            -*=*) ;;
            -*) [[ "$_ari_ledger_valued" == *" $word "* ]] && expect="$word" ;;
            *) (( npos++ )) ;;
        esac
    done
    if [[ -n "$expect" ]]; then
        _ari_ledger_value "$cmd" "$expect"
    elif [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$_ari_ledger_opts" -- "$cur") )
        return 0
    else
        _ari_ledger_positional "$cmd" "$npos"
    fi
    local IFS=$'\n'
    case "$_ari_ledger_kind" in
        dir) compopt -o filenames 2>/dev/null; COMPREPLY=( $(compgen -d -- "$cur") ) ;;
        file) compopt -o filenames 2>/dev/null; COMPREPLY=( $(compgen -f -- "$cur") ) ;;
        words:*) IFS=$' \t\n'; COMPREPLY=( $(compgen -W "${_ari_ledger_kind#words:}" -- "$cur") ) ;;
    esac
    return 0
}

complete -F _ari_ledger ari-ledger
"""


def _bash_kind(arg: Arg) -> str:
    return f"words:{' '.join(arg.words)}" if arg.kind == "words" else arg.kind


def bash_script() -> str:
    cmds = commands()
    q = shlex.quote
    out = [
        f"# bash completion for {PROG}, generated by `{PROG} completion bash` from its command registry.",
        f'# Load it in ~/.bashrc: eval "$({PROG} completion bash)"',
        f"# or save it as ~/.local/share/bash-completion/completions/{PROG}",
        "",
        f"_ari_ledger_commands={q(' '.join(c.name for c in cmds))}",
        "",
        "# each command's options (offered), and the options that take a value (hidden ones too)",
        "_ari_ledger_spec() {",
        '    case "$1" in',
    ]
    for c in cmds:
        shown = " ".join(o for a in c.options if not a.hidden for o in a.options)
        valued = " ".join(o for a in c.options if a.kind != "flag" for o in a.options)
        out += [
            f"        {q(c.name)})",
            f"            _ari_ledger_opts={q(shown)}",
            f"            _ari_ledger_valued={q(f' {valued} ')}",
            "            ;;",
        ]
    out += [
        "        *) return 1 ;;",
        "    esac",
        "}",
        "",
        "# what an option's value completes to",
        "_ari_ledger_value() {",
    ]
    out += ['    case "$1 $2" in']
    for c in cmds:
        for a in c.options:
            if a.kind not in ("flag", "none"):
                pattern = "|".join(q(f"{c.name} {o}") for o in a.options)
                out.append(f"        {pattern}) _ari_ledger_kind={q(_bash_kind(a))} ;;")
    out += ["        *) _ari_ledger_kind=none ;;", "    esac", "}", ""]
    out += ["# what the n-th positional (from 0) completes to", "_ari_ledger_positional() {", '    case "$1 $2" in']
    for c in cmds:
        visible = [a for a in c.positionals if not a.hidden]
        for i, a in enumerate(visible):
            if a.kind in ("none", "flag") and not a.rest:
                continue
            pattern = f"{q(c.name + ' ')}*" if a.rest else q(f"{c.name} {i}")
            out.append(f"        {pattern}) _ari_ledger_kind={q(_bash_kind(a))} ;;")
    out += ["        *) _ari_ledger_kind=none ;;", "    esac", "}"]
    return "\n".join(out) + "\n" + _BASH_MAIN


# --- zsh -------------------------------------------------------------------------------------


def _zsh_text(text: str, limit: int = 70) -> str:
    """A description inside ``[...]`` or ``name:descr``: first clause, no brackets or colons."""
    text = text.split("; ")[0].split(" (default")[0]
    for old, new in (("\\", "/"), ("[", "("), ("]", ")"), (":", " -"), ("`", "")):
        text = text.replace(old, new)
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _zsh_action(arg: Arg) -> str:
    if arg.kind == "words":
        return "(" + " ".join(arg.words) + ")"
    return {"dir": "_files -/", "file": "_files"}.get(arg.kind, " ")


def _zsh_specs(cmd: Command) -> list[str]:
    specs = []
    for a in cmd.options:
        if a.hidden:
            continue
        descr = _zsh_text(a.help)
        star = "*" if a.repeat else ""
        for o in a.options:
            if a.kind == "flag":
                specs.append(f"{star}{o}[{descr}]")
            else:
                suffix = "+" if not o.startswith("--") else "="
                specs.append(f"{star}{o}{suffix}[{descr}]:{a.name.lower()}:{_zsh_action(a)}")
    n = 0
    for a in cmd.positionals:
        if a.hidden:
            continue
        n += 1
        if a.rest:
            specs.append(f"*::{a.name}:_default")
        else:
            colon = "::" if a.optional and a.kind != "words" else ":"  # a choice left out has a default
            specs.append(f"{n}{colon}{_zsh_text(a.name)}:{_zsh_action(a)}")
    return specs


def _zsh_quote(spec: str) -> str:
    return "'" + spec.replace("'", "'\\''") + "'"


def zsh_script() -> str:
    cmds = commands()
    out = [
        f"#compdef {PROG}",
        f"# zsh completion for {PROG}, generated by `{PROG} completion zsh` from its command registry.",
        "# Save it as _ari_ledger in a directory of $fpath (before compinit runs), or in ~/.zshrc",
        f"# after compinit: source <({PROG} completion zsh)",
        "",
        "_ari_ledger() {",
        '  local curcontext="$curcontext" state line ret=1',
        "  typeset -A opt_args",
        "  _arguments -C \\",
        "    '(- *)'{-h,--help}'[show help and exit]' \\",
        "    '(- *)--version[print the version and exit]' \\",
        "    '1:command:->command' \\",
        "    '*::argument:->argument' && ret=0",
        "  case $state in",
        "    command)",
        "      local -a commands",
        "      commands=(",
    ]
    out += [f"        {_zsh_quote(c.name + ':' + _zsh_text(c.help))}" for c in cmds]
    out += [
        "      )",
        "      _describe -t commands 'ari-ledger command' commands && ret=0",
        "      ;;",
        "    argument)",
        "      curcontext=${curcontext%:*:*}:ari-ledger-$line[1]:",
        "      case $line[1] in",
    ]
    for c in cmds:
        specs = " \\\n          ".join(_zsh_quote(s) for s in _zsh_specs(c))
        out += [f"        {c.name})", f"          _arguments -s -S \\\n          {specs} && ret=0", "          ;;"]
    out += [
        "      esac",
        "      ;;",
        "  esac",
        "  return ret",
        "}",
        "",
        'if [[ "$funcstack[1]" == _ari_ledger ]]; then',
    ]
    out += ['  _ari_ledger "$@"', "else", "  compdef _ari_ledger ari-ledger", "fi", ""]
    return "\n".join(out)


def _completion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to print the completion script for")


@command(
    "completion",
    "print the shell completion script for bash or zsh (commands, options, their choices, files and directories)",
    _completion_args,
    exit_codes={EXIT_OK: "the script was printed"},
)
def cmd_completion(args: argparse.Namespace) -> int:
    print(bash_script() if args.shell == "bash" else zsh_script(), end="")
    return EXIT_OK
