"""What a scenario's job left to be judged from outside: the local runner's lines and exit code, every rank's log,
the run history, `slurmgen status`, `history`, `report --json`, what `slurmgen.Job` says, the resume state's files,
and what is left on the machine (processes, /dev/shm directories, jobs). A plain value, so the invariants can be fed
forged ones."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Observation:
    runner: str  # the runner's stderr: `slurmgen run`, then a `slurmgen resume`'s
    exit_code: int  # the last runner's exit code
    ranks: dict[int, str]  # rank -> its log (every run, appended)
    batch: str  # the batch log
    events: list[dict[str, Any]]  # the run history, every event
    status: str  # `slurmgen status JOB`
    history: str  # `slurmgen history JOB`
    report: dict[str, Any]  # `slurmgen report JOB --json`
    job: dict[str, Any]  # slurmgen.Job: state, exit_code, restarts, history
    state_files: list[str]  # the resume state's files left in the state directory
    processes: list[str] = field(default_factory=list)  # processes still running from the scenario's directory
    shm: list[str] = field(default_factory=list)  # /dev/shm directories of the job left
    jobs: int = 1  # jobs the submission left in the journal

    def final(self) -> tuple[str, int, int] | None:
        """The runner's last outcome line: state, exit code, runs."""
        import re

        found = re.findall(r"(COMPLETED|FAILED|PREEMPTED|CANCELLED|TIMEOUT), exit code (\d+), (\d+) runs?", self.runner)
        if not found:
            return None
        state, code, runs = found[-1]
        return state, int(code), int(runs)
