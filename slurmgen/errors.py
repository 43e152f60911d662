"""The exception tree. Library code raises these; the CLI catches them once and prints one line each.

Every error knows its exit code, so the CLI never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_FAILURE = 1
EXIT_INVALID = 2  # invalid input: a spec, an override, an argument
EXIT_SCHEDULER = 3  # the scheduler refused or failed
EXIT_NO_SCHEDULER = 4  # sbatch/scontrol not installed or not reachable


class SlurmgenError(Exception):
    """Base of every error slurmgen raises on purpose. `str()` is the one line the user sees."""

    exit_code = EXIT_FAILURE


@dataclass(frozen=True)
class Problem:
    """One problem in one input: where it is and what to do about it."""

    source: str  # a file name, or "--set" for command-line overrides
    path: str  # the field path, e.g. "preemption.lead_time"; "" for the whole file
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else self.source
        return f"{where}: {self.message}"


class SpecError(SlurmgenError):
    """A spec (or several) failed validation. Carries every problem found, not just the first."""

    exit_code = EXIT_INVALID

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(SlurmgenError):
    """A bad command-line argument that is not a spec field (a job id, a path, a signal name)."""

    exit_code = EXIT_INVALID


class SchedulerError(SlurmgenError):
    """A Slurm command ran and failed; the message is Slurm's own, not a traceback."""

    exit_code = EXIT_SCHEDULER


class SchedulerMissing(SlurmgenError):
    """A Slurm client command is not installed here."""

    exit_code = EXIT_NO_SCHEDULER


class RuntimeSetupError(SlurmgenError):
    """Inside a task: the environment does not allow a correct start (address, port, interface)."""

    exit_code = EXIT_FAILURE
