"""The oldest Pythons slurmgen runs on, checked before anything else is imported.

The batch shell's helper (slurmgen.batch) and each task's entry point and supervisor (slurmgen.task) run with the
spec's ``python``: the host's, or the image's inside a container, which may be old; they run from 3.9 up
(IN_JOB). slurmgen.runtime (the user's program imports it) and the CLI run from 3.10 up (RUNTIME, pyproject.toml's
requires-python); slurmgen.runtime checks that floor inline (it may import nothing; its README says why).

Below the floor a process prints one line (which Python, from which spec field or image, and the fix) and exits
REFUSED, so the batch script stops there without a second line of its own; the helper's ``begin`` first records
the run's start, so `slurmgen history` shows a run that started and was refused, not one that never started.
Written for any Python 3 (plain annotations and f-strings only: nothing that an old parser refuses), and imports
nothing of slurmgen at module level.
"""

import os
import sys

IN_JOB = (3, 9)  # slurmgen.batch, slurmgen.task and what they import (tests/test_python_floor.py runs them)
RUNTIME = (3, 10)  # slurmgen.runtime and the CLI: pyproject.toml's requires-python
MIN_PYTHON = IN_JOB  # the floor refuse_older checks

# The exit code of a process refused here: the batch script stops at once, saying nothing more (the line is said).
REFUSED = 9

_CONTAINER_VAR = "SLURMGEN_CONTAINER"  # slurmgen.contract.CONTAINER: "1" when tasks run inside an image


def dotted(version: "tuple[int, ...]") -> str:
    return ".".join(str(part) for part in version)


def refusal(part: str, floor: "tuple[int, int]", version: str, executable: str, in_container: bool) -> str:
    """The one line a process below ``floor`` says: which Python, where it comes from, and the fix."""
    need = dotted(floor)
    if in_container:
        return (
            f"slurmgen: {part} needs Python {need} or newer, and the image's python (spec field container.python, "
            f"else python) is {version} ({executable}): use an image with Python {need} or newer, or set "
            "container.python to one inside it"
        )
    return (
        f"slurmgen: {part} needs Python {need} or newer, and the spec field python runs {version} ({executable}): "
        f"set python to a Python {need} or newer (python: /path/to/python3)"
    )


def refuse_older(part: str) -> None:
    """Below MIN_PYTHON: one line and exit REFUSED under ``python -m``; an ImportError for an import."""
    if sys.version_info >= MIN_PYTHON:
        return
    version = sys.version.split()[0]
    message = refusal(part, MIN_PYTHON, version, sys.executable, os.environ.get(_CONTAINER_VAR) == "1")
    if sys.argv[:1] == ["-m"]:  # `python -m slurmgen.task` (runpy sets argv[0] to "-m" while it imports)
        if sys.argv[1:2] == ["begin"]:  # the batch shell's helper at the start of a run
            _record_start(message)
        print(message, file=sys.stderr)
        raise SystemExit(REFUSED)
    raise ImportError(message[len("slurmgen: ") :])


def _record_start(message: str) -> None:
    """The run's start in its history, with the refusal: best effort, as its readers run on newer Pythons."""
    try:
        import socket
        import time

        from slurmgen import run_history
        from slurmgen.job_context.context import JobContext

        ctx = JobContext.from_environ(os.environ)
        if ctx.log_dir:
            # "batch-shell": slurmgen.batch.commands.WRITER, which this Python cannot import
            fields = {"nodes": ctx.nodes, "host": socket.gethostname(), "partition": ctx.partition}
            run_history.append(
                ctx.log_dir, "batch-shell", run_history.RUN_START, ctx.run, time.time(), refused=message, **fields
            )
    except Exception:  # noqa: S110  (an old Python that cannot even record: the line below still says why)
        pass
