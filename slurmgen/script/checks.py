"""Checks on a finished script: does the preemption signal still reach the program? Our template passes them all;
they exist for templates a user brings (`--templates DIR`)."""

from __future__ import annotations

from slurmgen.errors import Problem
from slurmgen.script.render import TEMPLATE
from slurmgen.spec.model import JobSpec


def check_script(spec: JobSpec, script: str) -> list[Problem]:
    """Signal-delivery checks on the final script, for templates a user brought (ours pass them all)."""
    if not spec.preemption.enabled:
        return []
    sig = spec.preemption.signal
    found: list[Problem] = []
    lines = script.splitlines()
    if not any(line.lstrip().startswith("trap ") and line.rstrip().endswith(f" {sig}") for line in lines):
        found.append(
            Problem(
                TEMPLATE,
                "preemption.signal",
                f"the signal goes only to the batch shell (--signal=B:{sig}), and the script has no `trap ... {sig}`: "
                "the shell dies on it and your program never hears of it; keep the trap that forwards it to the step",
            )
        )
    if not any(line.lstrip().startswith("wait ") for line in lines):
        found.append(
            Problem(
                TEMPLATE,
                "",
                "the script never `wait`s: bash defers a trap until a foreground command ends, so the signal would "
                "arrive after the step; start the step with `&` and `wait` for it",
            )
        )
    return found
