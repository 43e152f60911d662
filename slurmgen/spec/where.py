"""Checks that need the filesystem where the job will run: is the script the command runs there, and the
directory of the error log?

The job runs in `chdir` (relative to the directory it is submitted from) or in that directory itself (sbatch(1),
--chdir: "the default is the current working directory of sbatch"). A command whose script is missing there fails
only once the job has waited in the queue and started on every node; `validate`, `render` and `submit` say so at
once. The file system is passed in (``exists``), so tests give plain values.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from slurmgen.errors import Problem
from slurmgen.spec.model import JobSpec

_PYTHON = re.compile(r"(python|pypy)[0-9.]*")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_PYTHON_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "-Q"})  # python(1): the next word is the option's value


def command_script(command: Sequence[str]) -> str | None:
    """The file a command runs: `train.py` in [python, -u, train.py], `run.sh` in [bash, run.sh], `scripts/go` in
    [scripts/go, ...], the first `*.py` after torchrun's options; None for `python -m pkg`, `bash -c '...'` or a
    program found on PATH."""
    if not command:
        return None
    program = os.path.basename(command[0])
    if program in ("torchrun", "accelerate"):
        return next((w for w in command[1:] if w.endswith(".py") and not w.startswith("-")), None)
    if _PYTHON.fullmatch(program) or program in _SHELLS:
        words = list(command[1:])
        while words:
            word = words.pop(0)
            if word in ("-c", "-m") or (word == "-" and program in _SHELLS):
                return None
            if word in _PYTHON_OPTIONS_WITH_VALUE and _PYTHON.fullmatch(program):
                words = words[1:]
            elif not word.startswith("-"):
                return word
        return None
    return command[0] if "/" in command[0] else None


def missing_script(
    spec: JobSpec, source: str, submit_dir: Path, exists: Callable[[Path], bool] = os.path.exists
) -> Problem | None:
    """A warning when the command's script is not where the job will run; None when it is, or cannot be told (a
    container image has its own files; a path with a shell variable is expanded only in the job)."""
    script = command_script(spec.command)
    if spec.container is not None or script is None or "$" in script or "~" in script:
        return None
    base = submit_dir / spec.chdir if spec.chdir else submit_dir
    path = Path(script) if os.path.isabs(script) else base / script
    if exists(path):
        return None
    where = f"chdir {spec.chdir}" if spec.chdir else "the directory you submit from"
    return Problem(
        source,
        "command",
        f"{script} does not exist in {base} ({where}, where the job runs); check the path, submit from the "
        "directory that holds it, or set chdir",
    )


def untrusted_checkpoint(spec: JobSpec, source: str, submit_dir: Path) -> Problem | None:
    """An error when checkpoint.path lies under a directory another user owns or can write (slurmgen/trust.py's
    rule, which every file slurmgen acts on obeys): the watch would count that user's files as the program's saves,
    and the resume flag would make the program load them. Each existing directory from the path's fixed part (the
    words before a glob's first wildcard) up to the root is asked; a path with a shell variable is only known in
    the job."""
    if spec.checkpoint is None or "$" in spec.checkpoint.path:
        return None
    from slurmgen import trust  # only for a spec with a checkpoint: a plain render loads no more than it uses

    written = spec.checkpoint.path
    base = submit_dir / spec.chdir if spec.chdir else submit_dir
    fixed = re.split(r"[*?\[]", written, maxsplit=1)[0]
    path = Path(fixed) if os.path.isabs(fixed) else base / fixed
    folder = path if fixed.endswith("/") or path.is_dir() else path.parent
    for directory in (folder, *folder.parents):
        why = trust.why_not_dir(str(directory))
        if why is not None:
            return Problem(source, "checkpoint.path", f"{written}: {why}; the program's saves must be in a "
                           "directory only you can write (slurmgen resumes the program from them)")  # fmt: skip
    return None
