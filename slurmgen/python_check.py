"""The job's Python, checked before the queue: the spec's ``python`` asked for its version once, and the answer
held against slurmgen's floors (slurmgen.python_floor), so a job that would stop at its first line says so at
submit time instead of after its wait in the queue.

The probe is one call of ``<python> -c 'import sys; print(sys.version_info[:2])'`` through a runner (the Slurm
client's Runner: argv, env, timeout); every decision is the pure ``judge``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

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
