"""``handler: program`` for Python programs: the supervisor starts them with the preemption signal blocked, at its
default action, and a start-up hook unblocks it once the program handles it.

Blocked, not ignored: a framework that handles the signal itself often installs its handler only where none is
set. Lightning's SignalConnector checks ``signal.getsignal(SIGUSR1) not in (None, SIG_DFL)``; CPython reads the
action the process started with, so under SIG_IGN it would see a handler, install none, and never handle the
signal. Blocked at the default action, ``getsignal`` says SIG_DFL and an early signal waits, pending (signal(7):
the mask and the pending set survive execve(2)). Python's ``signal.signal`` does not unblock, so a start-up hook
does: ``pyhook/sitecustomize.py``, first on the program's PYTHONPATH, unblocks the signal once the program
installs a handler for it.

The hook runs only where the program is a Python interpreter, or a script whose ``#!`` line names one, and none
of ``-E``, ``-I`` (PYTHONPATH ignored) or ``-S`` (no sitecustomize) is given. Any other program starts with the
signal ignored, and the supervisor sends it again once /proc shows the program's handler.

The same hook, for any handler, registers faulthandler for the hang watchdog (slurmgen.task.program_stacks).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from slurmgen import contract

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyhook")
_PYTHON = re.compile(r"python[0-9.]*")
_WITH_VALUE = ("-W", "-X", "--check-hash-based-pycs")  # options whose value is the next word
_HOOK_OFF = set("EIS")


def _hook_disabled(options: Sequence[str]) -> bool:
    """True when the interpreter's options (before the script, -m or -c) keep sitecustomize from this hook."""
    skip = False
    for word in options:
        if skip:
            skip = False
            continue
        if word in ("-m", "-c", "-", "--") or not word.startswith("-"):
            return False
        if word in _WITH_VALUE:
            skip = True
            continue
        if not word.startswith("--"):
            letters = re.split(r"[WXmc]", word[1:], maxsplit=1)[0]  # -Wdefault, -mpkg: the rest is a value
            if _HOOK_OFF & set(letters):
                return True
    return False


def _shebang(path: str) -> list[str]:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    words = first[2:].decode("utf-8", "replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if w != "-S"]  # `#!/usr/bin/env -S python3 -u`
    return words


def hooks_python(path: str, command: Sequence[str]) -> bool:
    """Whether the program at ``path`` (argv ``command``) is a Python that will load the start-up hook."""
    if _PYTHON.fullmatch(os.path.basename(path)) or _PYTHON.fullmatch(os.path.basename(os.path.realpath(path))):
        return not _hook_disabled(command[1:])
    words = _shebang(path)
    if words and _PYTHON.fullmatch(os.path.basename(words[0])):
        return not _hook_disabled(words[1:])
    return False


def hook_path(env: Mapping[str, str]) -> dict[str, str]:
    """The program's environment with the hook first on PYTHONPATH (once, whoever asks for it first)."""
    out = dict(env)
    before = env.get("PYTHONPATH", "")
    if before.split(os.pathsep)[0] != HOOK_DIR:
        out["PYTHONPATH"] = HOOK_DIR + (os.pathsep + before if before else "")
    return out


def hook_env(env: Mapping[str, str], signum: int) -> dict[str, str]:
    """The program's environment with the hook first on PYTHONPATH and the signal it unblocks."""
    # int(): a signal.Signals is an IntEnum, whose str() is "Signals.SIGUSR1" before 3.11 (enum docs, IntEnum)
    return {**hook_path(env), contract.UNBLOCK_ON_HANDLER: str(int(signum))}
