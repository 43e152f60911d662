"""A job `slurmgen run` ran on this machine (`local-3`, an array task `local-3_0`) as a job handle: its local journal
says what it is, its control directory whether its runner still runs; Slurm is never asked."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import LogView, Report, Say
from slurmgen.errors import UsageError
from slurmgen.local import local_jobs
from slurmgen.submission.targets import Target, local_target

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.queries.goodput_view import Goodput

ENDED_POLL = 0.5  # seconds between looks at the runner while following its logs: a local look, cheap


def target_of(record: local_jobs.LocalRecord) -> Target:
    """The job as the log and history readers take it: its key (`3`, or `3_0` for an array task), its entry."""
    return local_target(record.entry)


class LocalJob:
    def __init__(self, base: Path, record: local_jobs.LocalRecord) -> None:
        self.base = base
        self.record = record
        self.target = target_of(record)

    @property
    def label(self) -> str:
        return self.record.label

    @property
    def notes(self) -> tuple[str, ...]:
        return ()

    def _fresh(self) -> local_jobs.LocalRecord:
        return local_jobs.find(self.base, self.record.job_id)

    def status(self) -> Report:
        from slurmgen.queries import status as st
        from slurmgen.queries.history import restart_lines, step_restarts

        row = local_jobs.row(self._fresh(), time.time(), step_restarts(self.target, []))
        # restarts and excluded nodes (`slurmgen run --kill-rank`, `--bad-node`)
        from slurmgen.queries.goodput_view import live_lines

        out = (st.table([row]), *live_lines(self.target, None))
        return Report(out=out, notes=tuple(restart_lines([self.target])))

    def state(self) -> str:
        return self._fresh().state

    def exit_code(self) -> int | None:
        record = self._fresh()
        code = record.entry.extra.get("exit_code")
        return code if isinstance(code, int) and record.state not in ("RUNNING", "UNKNOWN") else None

    def wait(self, pause: Callable[[float], None]) -> str:
        while local_jobs.live_runner(self.record.control) is not None:
            pause(ENDED_POLL)
        return self.state()

    def logs(self, rank: int | None, node: str | None) -> LogView:
        from slurmgen.queries import logs as lg

        batch = lg.batch_logs(self.target, [])  # its journal entry knows its logs
        return LogView(
            files=lambda: lg.select(batch, node, rank),
            others=lambda: lg.select(batch, None),
            ended=lambda: local_jobs.live_runner(self.record.control) is None,
            poll=lg.POLL,
            missing=lambda: lg.missing_message(self.target, batch, node, [], rank),
        )

    def code(self) -> str | None:
        return None  # the files in the job's directory, as they are

    def args(self) -> tuple[str, ...]:
        return self.record.entry.args

    def history_points(self) -> list[tuple[int, str, list[Path]]] | None:
        return None  # one job

    def history_dirs(self) -> tuple[list[Path], str]:
        from slurmgen.queries.history import job_log_dirs, no_history

        log_dirs = job_log_dirs(self.target, [])
        return log_dirs, no_history(self.target, log_dirs, True)

    def cancel(self, signal: str | None, to: str | None) -> Report:
        """End the running job as scancel does, or deliver a signal to its batch shell (SIGCONT first)."""
        from slurmgen.signal_names import require_signal_name

        sig = None if signal is None else require_signal_name(signal, "--signal")
        control, label = self.record.control, self.label
        if to not in (None, "batch"):
            raise UsageError(f"--to {to}: a local job's signal goes to its batch shell (--to batch), which forwards it")
        if local_jobs.live_runner(control) is None:
            if sig is None:
                return Report(notes=(f"job {label} already ended; nothing to cancel",))
            raise UsageError(f"job {label} already ended; there is nobody to signal")
        if sig is not None:
            runner = local_jobs.send_signal(control, sig)
            return Report(notes=(f"sending SIG{sig} to {label} (batch: its runner, pid {runner}, gives it to the "
                                 "batch shell)",))  # fmt: skip
        runner = local_jobs.cancel(control)
        return Report(notes=(f"cancelling {label}: its runner (pid {runner}) ends every process (SIGTERM, SIGKILL "
                             "after KillWait)",))  # fmt: skip

    def requeue(self, hold: bool, finished: bool) -> Report:
        raise UsageError(
            f"{self.label} ran on this machine: its runner requeues it when it asks; to run it again from its saved "
            f"state: slurmgen resume {self.label}"
        )

    def resume(self, say: Say) -> Report:
        """Run it again, here, from its saved state (in the foreground: the report carries its exit code)."""
        from slurmgen.local.command import resume_local

        if self.target.job.array_task is not None:
            raise UsageError(f"{self.label} is a task of a local array: run the spec again (a local array task is "
                             "not resumed on its own)")  # fmt: skip
        return Report(code=resume_local(self._fresh(), say))

    def point(self, index: int) -> JobHandle:
        raise UsageError(f"--point: {self.label!r} is not a sweep (see `slurmgen status {self.label}`)")

    def goodput(self) -> Goodput:
        from slurmgen.queries.goodput_view import job_goodput

        return job_goodput(self.target, None)
