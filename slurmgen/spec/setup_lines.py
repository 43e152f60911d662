"""The spec's raw shell (setup: and teardown:) and what in it the batch shell cannot make safe.

Setup items run in the batch shell itself, before slurmgen's step loop (templates/sbatch.sh.j2), so that what they
export, source or `cd` into reaches the step. What they do to the shell itself is undone right after them: the
shell's options (`set -euxo pipefail`, `shopt`) are put back as they were, and slurmgen's traps are installed
again, since bash keeps one action per signal and a user's `trap ... TERM` would replace slurmgen's (validate says
so, naming the line). Two things cannot be undone: `exit` ends the script before slurmgen records the run, and
`exec COMMAND` replaces the shell; both are refused, with the line. Read here with the shell's own word rules
(shlex), so that a quoted word (`echo "trap x TERM"`) is not taken for a command.
"""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Iterator

from slurmgen import contract

_SEPARATORS = {";", "&", "&&", "|", "||", "(", ")", "{", "}", "then", "do", "else", "elif", "!"}


def batch_trapped_signals(preemption_signal: str | None) -> list[str]:
    """The signals the batch shell traps and forwards to the step (templates/sbatch.sh.j2, its first lines): the
    preemption signal while that handling is on, then the clean-exit and save-and-exit signals."""
    return ([preemption_signal] if preemption_signal else []) + [contract.CLEAN_EXIT_SIGNAL, contract.SAVE_EXIT_SIGNAL]


def _commands(line: str) -> Iterator[list[str]]:
    """The simple commands of a line, as words; nothing for a line the shell's rules cannot split."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        return
    command: list[str] = []
    for token in tokens:
        if token in _SEPARATORS or (token and set(token) <= set(";&|()")):
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def _signal_name(spec: str) -> str:
    """`TERM`, `SIGTERM`, `sigterm` and `15` are one signal for bash's trap; `0` is EXIT."""
    name = spec.upper().removeprefix("SIG")
    if name.isdigit():
        number = int(name)
        if number == 0:
            return "EXIT"
        try:
            return signal.Signals(number).name.removeprefix("SIG")
        except ValueError:
            return name
    return name


def trapped_in(line: str) -> list[str]:
    """The signals (and EXIT) whose handling a `trap` command of this line changes: `trap 'x' TERM INT` and
    `trap - TERM` (back to the default) both change it; `trap -p` and `trap -l` only print."""
    found: list[str] = []
    for words in (w for _, part in _command_lines(line.split("\n")) for w in _commands(part)):
        if not words or words[0] != "trap":
            continue
        args = words[1:]
        if args and args[0] == "--":
            args = args[1:]
        if not args or args[0] in ("-p", "-l"):
            continue
        found += [_signal_name(word) for word in args[1:]]
    return found


def _ends_the_shell(words: list[str]) -> str | None:
    """`exit` (or `logout`), or an `exec` that runs a command; `exec >log 2>&1` only redirects, and stays."""
    if not words:
        return None
    if words[0] in ("exit", "logout"):
        return words[0]
    if words[0] != "exec":
        return None
    redirect = False
    for word in words[1:]:
        if set(word) <= set("<>&|") or (word.isdigit() and not redirect):
            redirect = set(word) <= set("<>&|")
            continue
        if redirect:  # the target of a redirection (`>log`, `2>&1`)
            redirect = False
            continue
        return "exec"
    return None


_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _command_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """The lines of a block that the shell reads as commands (1-based), without the bodies of its here-documents
    (bash(1), "Here Documents": the lines up to the delimiter are the command's input, not commands)."""
    until: list[tuple[str, bool]] = []
    for number, line in enumerate(lines, 1):
        if until:
            word, tabs = until[0]
            if (line.lstrip("\t") if tabs else line) == word:
                until.pop(0)
            continue
        yield number, line
        until = [(m[3], m[1] == "-") for m in _HEREDOC.finditer(line)]


ONE_PER_LINE = "one shell line per item works too, e.g. setup: [module load cuda, source .venv/bin/activate]"


def item_problem(item: str, ends_ok: bool = False) -> str | None:
    """Why the batch shell cannot run this item (one line or a block) as written and still reach its own lines
    after it, or None. The message names the item's line (1-based within a block) and its text. ``ends_ok``: the
    item runs in a subshell (teardown), where `exit` and `exec` end only that."""
    lines = item.split("\n")
    for number, line in [] if ends_ok else _command_lines(lines):
        for words in _commands(line):
            found = _ends_the_shell(words)
            if found is None:
                continue
            where = f"line {number} (`{line.strip()}`)" if len(lines) > 1 else f"`{line.strip()}`"
            if found == "exec":
                fix = (
                    "replaces the batch shell, so slurmgen's lines after setup never run; run the command without "
                    "exec (`exec >FILE 2>&1` alone only redirects, and is fine)"
                )
            else:
                fix = (
                    f"{found} ends the batch script before slurmgen starts the step or records the run; a failing "
                    "line already ends the job (setup_fail_fast), so let the line fail instead (e.g. `test -d venv`)"
                )
            return f"{where}: {fix}; {ONE_PER_LINE}"
    last = item.rstrip("\n").rsplit("\n", 1)[-1]
    if (len(last) - len(last.rstrip("\\"))) % 2 == 1:
        return (
            f"`{last.strip()}` ends with a backslash, which would join it to slurmgen's next line; remove it, or "
            f"write the continued line into a block (|); {ONE_PER_LINE}"
        )
    return None
