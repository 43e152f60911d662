"""The spec's raw shell (setup:) and what in it breaks the batch shell's own lines that follow it.

Setup lines run in the batch shell itself, before slurmgen's step loop (templates/sbatch.sh.j2), so what they
change stays changed for it: a `trap` replaces slurmgen's trap for that signal (bash keeps one action per
signal), and `set -e` ends the shell at the first command that fails, the `wait` for a failed step included,
before slurmgen restarts, requeues or records it. Read here with the shell's own word rules (shlex), so that a
quoted word (`echo "trap x TERM"`) is not taken for a command.
"""

from __future__ import annotations

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
    for words in _commands(line):
        if not words or words[0] != "trap":
            continue
        args = words[1:]
        if args and args[0] == "--":
            args = args[1:]
        if not args or args[0] in ("-p", "-l"):
            continue
        found += [_signal_name(word) for word in args[1:]]
    return found


def errexit_in(line: str) -> list[str]:
    """The shell options of a `set` command of this line that change how slurmgen's own lines run: errexit
    (`set -e`, `set -euo pipefail`, `set -o errexit`) and pipefail."""
    found: list[str] = []
    for words in _commands(line):
        if not words or words[0] != "set":
            continue
        args = words[1:]
        for i, word in enumerate(args):
            if word.startswith("-") and not word.startswith("--") and "e" in word[1:]:
                found.append("set -e")
            if word.startswith("-") and word.endswith("o") and i + 1 < len(args):
                option = args[i + 1]
                if option == "errexit":
                    found.append("set -e")
                elif option == "pipefail":
                    found.append("set -o pipefail")
    return sorted(set(found))
