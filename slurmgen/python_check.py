"""The job's Python, checked before the queue: the spec's ``python`` asked for its version once, and the answer
held against slurmgen's floors (slurmgen.python_floor), so a job that would stop at its first line says so at
submit time instead of after its wait in the queue.

The probe is one call of ``<python> -c 'import sys; print(sys.version_info[:2])'`` through a runner (the Slurm
client's Runner: argv, env, timeout), or one line of a remote call that rides along (slurmgen.backends.slurm_ssh's
survey); every decision is the pure ``judge``, and ``before_queue`` refuses or warns. An image's own python
(``container.python``) is not asked at submit: starting a container costs seconds to minutes (a docker:// image is
pulled) and the image lives on the nodes; `slurmgen doctor SPEC` asks it with one short step (slurmgen.doctor.image).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from slurmgen.errors import SlurmgenError
from slurmgen.exit_codes import EXIT_INVALID
from slurmgen.python_floor import IN_JOB, RUNTIME, dotted
from slurmgen.slurm.client import Runner

PROBE = "import sys; print(sys.version_info[:2])"
_VERSION = re.compile(r"\((\d+), (\d+)\)")


@dataclass(frozen=True)
class PythonCheck:
    """What the probe found: ``version`` (None when it could not tell), ``problem`` (one line) and ``note``."""

    python: str
    version: tuple[int, int] | None
    problem: str | None = None  # the job cannot start: below the in-job floor, or the interpreter did not run
    note: str | None = None  # it starts, but a program importing slurmgen.runtime would be refused

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def version_text(self) -> str:
        return "unknown" if self.version is None else dotted(self.version)


def parse_version(stdout: str) -> tuple[int, int] | None:
    """``(3, 9)`` from the probe's output; None for anything else."""
    found = _VERSION.fullmatch(stdout.strip())
    return None if found is None else (int(found[1]), int(found[2]))


def judge(python: str, version: tuple[int, int] | None, said: str = "") -> PythonCheck:
    """The verdict on the spec's ``python`` at ``version`` (None: it did not run; ``said`` is its stderr)."""
    if version is None:
        why = said.strip().splitlines()[-1] if said.strip() else "no version printed"
        return PythonCheck(python, None, f"python: {python} did not run ({why}): set the spec field python")
    if version < IN_JOB:
        return PythonCheck(
            python,
            version,
            f"python: {python} is Python {dotted(version)}; slurmgen's batch shell helper and task supervisor need "
            f"{dotted(IN_JOB)} or newer: set the spec field python to a newer interpreter",
        )
    if version < RUNTIME:
        return PythonCheck(
            python,
            version,
            note=f"python: {python} is Python {dotted(version)}: a program on it cannot import slurmgen.runtime "
            f"(needs {dotted(RUNTIME)} or newer)",
        )
    return PythonCheck(python, version)


def probe(python: str, run: Runner, timeout: float = 30.0) -> PythonCheck:
    """Ask ``python`` for its version once, through ``run``; a missing or hung interpreter is a problem line."""
    try:
        done = run([python, "-c", PROBE], None, timeout)
    except FileNotFoundError:
        return judge(python, None, "not found")
    except subprocess.TimeoutExpired:
        return judge(python, None, f"no answer within {timeout:g} s")
    except OSError as error:
        return judge(python, None, error.strerror or str(error))
    if done.returncode != 0:
        return judge(python, None, done.stderr or f"exit {done.returncode}")
    return judge(python, parse_version(done.stdout), done.stderr)


class PythonRefused(SlurmgenError):
    """The spec's ``python`` is below the floor: the job would stop at its first line after its wait in the queue."""

    exit_code = EXIT_INVALID


NO_CHECK = "--no-check submits anyway"


def before_queue(check: PythonCheck, spec: str, where: str, setup: bool, warn: Callable[[str], object]) -> None:
    """Act on the verdict before anything is submitted: refuse in one line (the spec file, the field, the
    interpreter, where it was asked, the fix) a Python that ran and is below the in-job floor; say the rest.

    What the job runs may differ from what was asked here: a bare name (`python3`) is looked up on the job's PATH,
    which the spec's ``setup`` lines (``setup``: it has some) may change (`module load python`). So a bare name
    below the floor is refused only without setup lines (else a warning), and one that did not run here is left
    alone (the nodes may have it); an absolute path that did not run is a warning."""
    absolute = check.python.startswith("/")
    if check.problem is not None:
        line = f"{spec}: {check.problem} (asked {where})"
        if check.version is not None and (absolute or not setup):
            raise PythonRefused(f"{line}; {NO_CHECK}")
        if check.version is not None:
            warn(f"warning: {line}; the spec's setup lines may change it")
        elif absolute and not setup:
            warn(f"warning: {line}")
    elif check.note is not None:
        warn(f"note: {spec}: {check.note}")
