"""The exception tree. Library code raises these; the CLI catches them once and prints one line each.

Every error knows its exit code, so the CLI never guesses.
"""

from __future__ import annotations

from slurmgen.exit_codes import EXIT_FAILURE, EXIT_INVALID, EXIT_NO_SCHEDULER, EXIT_SCHEDULER


class SlurmgenError(Exception):
    """Base of every error slurmgen raises on purpose. `str()` is the one line the user sees."""

    exit_code = EXIT_FAILURE


class Problem:
    """One problem in one input: where it is and what to do about it.

    A plain class rather than a dataclass: this module is imported on every CLI start and inside every task,
    and `dataclasses` alone costs more to import than the rest of the fast path.
    """

    __slots__ = ("message", "path", "source")

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source  # a file name (with :line), or "--set" for command-line overrides
        self.path = path  # the field path, e.g. "preemption.lead_time"; "" for the whole file
        self.message = message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Problem):
            return NotImplemented
        return (self.source, self.path, self.message) == (other.source, other.path, other.message)

    def __hash__(self) -> int:
        return hash((self.source, self.path, self.message))

    def __repr__(self) -> str:
        return f"Problem({self.source!r}, {self.path!r}, {self.message!r})"

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


class RuntimeSetupError(SlurmgenError, RuntimeError):
    """Inside a task: the environment does not allow a correct start (address, port, interface)."""

    exit_code = EXIT_FAILURE


def error_lines(exc: SlurmgenError) -> list[str]:
    """What an error says to a person, one `error: ...` line per problem: the CLI's boundary and the local array's
    task processes (each an entry point of its own) print these same lines."""
    if isinstance(exc, SpecError):
        return [f"error: {problem}" for problem in exc.problems]
    return [f"error: {exc}"]


class SlurmgenWarning(UserWarning):
    """Inside a task: a setup choice that will probably hurt (a variable that selects no interface, NCCL's
    asynchronous error handling off)."""
