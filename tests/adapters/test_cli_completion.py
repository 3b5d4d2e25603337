"""``ari-ledger completion bash|zsh`` (issue 28 item 3a), tried in the real shells.

The bash script is sourced in ``bash``, ``COMP_WORDS``/``COMP_CWORD`` are set as readline sets
them, the completion function is called and ``COMPREPLY`` is compared with what should be
offered. The zsh script is checked by ``zsh -n``, loaded after ``compinit`` in ``zsh -f``, and
driven through a pseudo-terminal (``zsh/zpty``): a line is typed, Tab pressed, and every
match the completion system adds is read back.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from projections.adapters.cli import build_parser
from projections.adapters.cli.completion import commands
from support.env import subprocess_env


def script(shell: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "projections", "completion", shell],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a person's directory holds: a checkpoint, a chart file beside it, a report, a bundle."""
    work = tmp_path_factory.mktemp("completion")
    (work / "checkpoint" / "memory_ledger").mkdir(parents=True)
    (work / "chart.txt").write_text("a file whose name starts like the checkpoint's\n")
    (work / "report.html").write_text("<html></html>\n")
    (work / "bundle.tar").write_bytes(b"")
    return work


# --- bash ------------------------------------------------------------------------------------

BASH_DRIVER = r"""
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
_ari_ledger
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def bash_script(workdir: Path) -> Path:
    path = workdir.parent / "ari-ledger.bash"
    path.write_text(script("bash"))
    return path


def bash_complete(bash_script: Path, workdir: Path, *words: str) -> list[str]:
    """What bash offers for the command line ``words`` (the last one being typed)."""
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "driver", str(bash_script), "ari-ledger", *words],
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_bash_script_is_valid_bash_and_registers_the_function(bash_script: Path) -> None:
    assert subprocess.run(["bash", "-n", str(bash_script)], capture_output=True).returncode == 0
    done = subprocess.run(
        ["bash", "--norc", "-c", f'source "{bash_script}"; complete -p ari-ledger'], capture_output=True, text=True
    )
    assert done.stdout.strip() == "complete -F _ari_ledger ari-ledger", done.stderr


def test_bash_offers_every_registered_command(bash_script: Path, workdir: Path) -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert bash_complete(bash_script, workdir, "") == list(sub.choices)  # all of them, in --help's order
    assert bash_complete(bash_script, workdir, "se") == ["search"]
    assert set(bash_complete(bash_script, workdir, "re")) == {
        "repair",
        "redact",
        "report",
        "reads",
        "rebuild",
        "restore",
    }
    assert bash_complete(bash_script, workdir, "--v") == ["--version"]


def test_bash_offers_a_commands_options_but_not_its_hidden_old_spellings(bash_script: Path, workdir: Path) -> None:
    offered = bash_complete(bash_script, workdir, "search", "--")
    assert offered == ["--help", "--json", "--as", "--ancestors", "--limit", "--as-of", "--kind"]
    assert bash_complete(bash_script, workdir, "search", "checkpoint", "--as") == ["--as", "--as-of"]
    assert "--html" not in bash_complete(bash_script, workdir, "prove", "--")
    assert {"-o", "--output"} <= set(bash_complete(bash_script, workdir, "prove", "-"))


def test_bash_offers_choices(bash_script: Path, workdir: Path) -> None:
    benches = ["ledger", "projections", "letta", "hooks", "processes", "redact", "prove", "client", "retrieval", "all"]
    assert bash_complete(bash_script, workdir, "bench", "") == benches
    assert bash_complete(bash_script, workdir, "bench", "l") == ["ledger", "letta"]
    assert {"up", "down", "status"} <= set(bash_complete(bash_script, workdir, "letta", ""))
    assert bash_complete(bash_script, workdir, "completion", "") == ["bash", "zsh"]
    assert bash_complete(bash_script, workdir, "search", "checkpoint", "q", "--kind", "exp") == ["experiment_result"]
    assert bash_complete(bash_script, workdir, "verified", "checkpoint", "--min-evidence", "v") == [
        "verified",
        "values_checked",
    ]


def test_bash_offers_directories_for_a_checkpoint_and_files_for_a_file(bash_script: Path, workdir: Path) -> None:
    assert bash_complete(bash_script, workdir, "tree", "ch") == ["checkpoint"]  # not chart.txt: a directory
    assert bash_complete(bash_script, workdir, "search", "--as", "root", "ch") == ["checkpoint"]  # root is --as's
    assert bash_complete(bash_script, workdir, "search", "--node", "root", "ch") == ["checkpoint"]  # also hidden ones'
    assert bash_complete(bash_script, workdir, "search", "checkpoint", "ch") == []  # the query: nothing to offer
    assert bash_complete(bash_script, workdir, "report", "checkpoint", "-o", "rep") == ["report.html"]
    assert bash_complete(bash_script, workdir, "report", "checkpoint", "--experiments", "") == ["checkpoint"]
    assert set(bash_complete(bash_script, workdir, "import", "")) == {
        "checkpoint",
        "chart.txt",
        "report.html",
        "bundle.tar",
    }
    assert bash_complete(bash_script, workdir, "import", "bundle.tar", "") == ["checkpoint"]
    assert bash_complete(bash_script, workdir, "log", "checkpoint", "--as-of", "") == []  # a number


# --- zsh -------------------------------------------------------------------------------------

needs_zsh = pytest.mark.skipif(
    shutil.which("zsh") is None, reason="zsh is not installed (tests/run installs it as root)"
)

# Typed into an interactive zsh in a pseudo-terminal: compinit, and a compadd that prints
# every match it adds (after zsh's own matching), between two NUL lines. It adds them too: a
# function that finds no match falls back to the next tag (_files -/ to every file).
ZSH_INIT = r"""
PROMPT='' RPROMPT=''
fpath=("$COMPLETION_DIR" $fpath)
autoload -Uz compinit && compinit -u -D
bindkey '^I' complete-word
null-line () { echo -E - $'\0' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
compadd () {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "$@"
        return $?
    fi
    typeset -a __hits
    builtin compadd -A __hits "$@"
    local h
    for h in $__hits; do echo -E - "MATCH:$h"; done
    builtin compadd "$@"
}
echo ready
"""

ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "source ${(q)ZSH_INIT_FILE}"
zpty -r z line '*ready*'
zpty -w z "$1"$'\t'
integer tog=0
while zpty -r z; do :; done | while IFS= read -r line; do
    if [[ $line == *$'\0\r' ]]; then
        (( tog++ )) && break || continue
    fi
    (( tog )) && print -r -- "${line%$'\r'}"
done
zpty -d z
"""


@pytest.fixture(scope="module")
def zsh_dir(workdir: Path) -> Path:
    where = workdir.parent / "zsh"
    where.mkdir(exist_ok=True)
    (where / "_ari_ledger").write_text(script("zsh"))
    (where / "init.zsh").write_text(ZSH_INIT)
    (where / "drive.zsh").write_text(ZSH_DRIVER)
    return where


def zsh_complete(zsh_dir: Path, workdir: Path, line: str) -> list[str]:
    """What zsh's completion system offers for ``line`` (Tab at its end)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(zsh_dir),
        "TERM": "dumb",
        "COMPLETION_DIR": str(zsh_dir),
        "ZSH_INIT_FILE": str(zsh_dir / "init.zsh"),
    }
    done = subprocess.run(
        ["zsh", "-f", str(zsh_dir / "drive.zsh"), line],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = [line.removeprefix("MATCH:") for line in done.stdout.splitlines() if line.startswith("MATCH:")]
    return list(dict.fromkeys(found))  # a tag tried twice adds its matches twice


@needs_zsh
def test_the_zsh_script_parses_and_defines_the_function_after_compinit(zsh_dir: Path) -> None:
    path = zsh_dir / "_ari_ledger"
    assert subprocess.run(["zsh", "-n", str(path)], capture_output=True).returncode == 0
    # sourced after compinit (the ~/.zshrc way): the function is defined and bound to ari-ledger
    probe = f'autoload -Uz compinit && compinit -u -D; source {path}; whence -w _ari_ledger; print -r -- "$_comps[ari-ledger]"'
    done = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, env={"HOME": str(zsh_dir)})
    assert done.stdout.splitlines() == ["_ari_ledger: function", "_ari_ledger"], done.stderr
    # from $fpath (the #compdef way): compinit binds it by its first line
    probe = f'fpath=({zsh_dir} $fpath); autoload -Uz compinit && compinit -u -D; print -r -- "$_comps[ari-ledger]"'
    done = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, env={"HOME": str(zsh_dir)})
    assert done.stdout.strip() == "_ari_ledger", done.stderr


@needs_zsh
def test_zsh_completes_commands_options_choices_and_directories(zsh_dir: Path, workdir: Path) -> None:
    assert zsh_complete(zsh_dir, workdir, "ari-ledger sea") == ["search"]
    assert set(zsh_complete(zsh_dir, workdir, "ari-ledger ")) == {c.name for c in commands()}
    assert set(zsh_complete(zsh_dir, workdir, "ari-ledger search --a")) == {"--as", "--ancestors", "--as-of"}
    options = set(zsh_complete(zsh_dir, workdir, "ari-ledger search --"))
    assert {"--as", "--kind", "--limit", "--json"} <= options and "--node" not in options
    benches = ["ledger", "projections", "letta", "hooks", "processes", "redact", "prove", "client", "retrieval", "all"]
    assert zsh_complete(zsh_dir, workdir, "ari-ledger bench ") == benches
    assert zsh_complete(zsh_dir, workdir, "ari-ledger search checkpoint q --kind exp") == ["experiment_result"]
    assert set(zsh_complete(zsh_dir, workdir, "ari-ledger tree ch")) == {"checkpoint"}  # not chart.txt
    assert "report.html" in zsh_complete(zsh_dir, workdir, "ari-ledger report checkpoint -o rep")
