"""The task that failed first, and the exit code the job should end with.

With `--kill-on-bad-exit` one failing task makes slurmstepd stop the others with SIGTERM, and the step (srun)
exits with the highest code of all: measured on Slurm 22.05, task 1 exiting 3 made the job ExitCode=143:0, from a
sibling's SIGTERM, while srun's own line said "task 1: Exited with exit code 3". Each task's supervisor records a
failure of its program's own (no stop signal came first) in the run history (run_history.TASK_EXIT); the batch
shell's `end` takes the one that failed first on its own (slurmgen/interruption/casualty.py, first_failure) as the
job's exit code and names its rank, node and log. With `srun: {kill-on-bad-exit: false}` (SLURMGEN_RUN_ON_BAD_EXIT)
the others run on and srun waits for all of them: its code is still the highest of its tasks', now their own.
Pure, but for reading the last lines of that log.
"""

from __future__ import annotations

import os
import re

from slurmgen.interruption.casualty import TaskFailure, first_failure
from slurmgen.printable import printable

# the failure itself is the policy's (casualty.py)
__all__ = ["TaskFailure", "first_failure", "program_frame", "report", "tail"]

TAIL_LINES = 10
TAIL_BYTES = 16384  # read at most this much of the end of the log
TRACEBACK_LINES = 200  # of that end, where a traceback is looked for
# A frame of a Python traceback (traceback.py's `  File "{}", line {}, in {}`), with or without torch's `[rankN]: `.
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
# Code that is not the user's program: installed packages (torch's frames above all), the standard library, and
# the frozen import machinery.
_NOT_THE_PROGRAM = re.compile(r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+(?:\.\d+)?[/\\]|^<")


def tail(path: str | None, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` lines of a log, or [] when it cannot be read."""
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES and text:
        text = text[1:]  # the first line read is probably cut
    return text[-lines:]


def program_frame(lines: list[str], cwd: str = "") -> str | None:
    """The innermost frame of the user's own program in the last traceback of ``lines`` (a log's end), as
    ``file:line`` (relative to ``cwd`` when inside it), or None when no frame of the program is there."""
    found = None
    for line in lines:
        frame = _FRAME.search(line)
        if frame is not None and not _NOT_THE_PROGRAM.search(frame["file"]):
            found = (frame["file"], frame["line"])
    if found is None:
        return None
    path, number = found
    if cwd and os.path.isabs(path) and path.startswith(cwd.rstrip("/") + "/"):
        path = os.path.relpath(path, cwd)
    return f"{path}:{number}"


def report(failure: TaskFailure, step_code: int, last: list[str], step_kills: bool = True) -> list[str]:
    """What the batch log says about it: the rank's last lines, and its node and log from the run history, with
    every control character escaped (slurmgen/printable.py), as status and history show the history's text."""
    how = f"was killed by SIG{failure.signal}" if failure.signal else f"exited with code {failure.exit_code}"
    lines = [f"rank {failure.rank} on {failure.node} failed first: its program {how}"]
    if failure.raised:
        lines[0] = f"rank {failure.rank} on {failure.node} failed first: its program raised {failure.raised} and {how}"
    if not step_kills:
        lines[0] += "; the other tasks ran on (kill-on-bad-exit: false)"
    if step_code != failure.exit_code:
        why = "the other tasks' stop" if step_kills else "a task that ended after it"
        lines[0] += f"; the job exits {failure.exit_code} (the step's {step_code} comes from {why})"
    if failure.log:
        lines.append(f"its log: {failure.log}" + ("; last lines:" if last else " (empty)"))
        lines += [f"| {line}" for line in last]
    return [printable(line) for line in lines]  # the program's own text: its escape sequences are shown, not run
