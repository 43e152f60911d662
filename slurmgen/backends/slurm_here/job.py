"""A Slurm job (or array, or one array task) as a job handle: every question goes to Slurm when asked (one short
`scontrol`/`scancel` each), with the journal's entry (when it was submitted from here) for its logs and script."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import LogView, Report, Say
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.queries.goodput_view import Goodput
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.showjob import JobInfo
    from slurmgen.submission.targets import Target


class SlurmJob:
    """One Slurm job, from its resolved target (the job id and its journal entry, if any)."""

    def __init__(self, target: Target, client: SlurmClient | None = None, notes: tuple[str, ...] = ()) -> None:
        self.target = target
        self._client = client
        self._notes = notes

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def notes(self) -> tuple[str, ...]:
        return self._notes

    @property
    def client(self) -> SlurmClient:
        """This machine's Slurm client, naming the job's cluster on a multi-cluster site (`--clusters`)."""
        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client.on_cluster(self.target.cluster)

    def records(self) -> list[JobInfo]:
        """scontrol's records of the job; only the asked task's when one array task is named. One query."""
        infos = self.client.show_jobs(self.target.job)
        if self.target.job.array_task is not None:
            infos = [i for i in infos if i.job_id == self.target.job.without_step()]
        return infos

    def status(self) -> Report:
        from slurmgen.queries import status as st
        from slurmgen.queries.control import unknown_job
        from slurmgen.queries.history import last_failing, restart_lines, step_restarts, window_warnings

        rows, unknown = st.rows_for([self.target], self.client, failing=last_failing, step_restarts=step_restarts)
        if unknown and not rows:
            raise unknown_job(unknown[0].job)
        # a save that would be killed at the next stop; restarts inside the allocation
        # (docs/reliability.md, "When things fail")
        notes = (*window_warnings([self.target]), *restart_lines([self.target]))
        from slurmgen.queries.goodput_view import live_lines

        return Report(out=(st.table(rows), *live_lines(self.target, self.client)), notes=notes)

    def state(self) -> str:
        from slurmgen.queries.status import fold

        return fold([info.state_name for info in self.records()])

    def exit_code(self) -> int | None:
        from slurmgen.queries.wait import done, outcome

        infos = self.records()
        return outcome(infos).exit_code if done(infos) else None

    def wait(self, pause: Callable[[float], None]) -> str:
        from slurmgen.queries.wait import follow

        return follow(self.client, self.target.job, lambda infos: None, sleep=pause).state

    def logs(self, rank: int | None, node: str | None) -> LogView:
        from slurmgen.queries import logs as lg

        infos = self.client.show_jobs(self.target.job)
        batch = lg.batch_logs(self.target, infos)

        def ended() -> bool:
            current = self.client.show_jobs(self.target.job)
            return not current or all(i.state.is_terminal for i in current)

        return LogView(
            files=lambda: lg.select(batch, node, rank),
            others=lambda: lg.select(batch, None),
            ended=ended,
            poll=lg.STATE_POLL,
            missing=lambda: lg.missing_message(self.target, batch, node, infos, rank),
        )

    def code(self) -> str | None:
        return None  # the files in the job's directory, as they are

    def args(self) -> tuple[str, ...]:
        return () if self.target.entry is None else self.target.entry.args

    def history_points(self) -> list[tuple[int, str, list[Path]]] | None:
        return None  # one job

    def history_dirs(self) -> tuple[list[Path], str]:
        from slurmgen.queries.history import job_log_dirs, no_history

        known = self.target.entry is not None and bool(self.target.entry.log_dir)
        infos = [] if known else self.client.show_jobs(self.target.job)  # only to find the logs of another's job
        log_dirs = job_log_dirs(self.target, infos)
        return log_dirs, no_history(self.target, log_dirs, bool(infos))

    def cancel(self, signal: str | None, to: str | None) -> Report:
        from slurmgen.queries.control import cancel_job, trapped_signals
        from slurmgen.signal_names import require_signal_name

        sig = None if signal is None else require_signal_name(signal, "--signal")
        step = cancel_job(self.client, self.target.job, sig, to, trapped_signals(self.target.entry))
        if step is None:
            return Report(notes=(f"job {self.label} already ended; nothing to cancel",))
        return Report(notes=(step.message,))

    def requeue(self, hold: bool, finished: bool) -> Report:
        from slurmgen.queries.control import requeue_job
        from slurmgen.slurm.ids import cluster_label

        step = requeue_job(self.client, self.target.job, hold=hold, finished=finished)
        shown = cluster_label(self.target.cluster, step.target)
        return Report(notes=(step.message, f"done; follow it with: slurmgen status {shown}"))

    def resume(self, say: Say) -> Report:
        from slurmgen.journal import Journal, find_home
        from slurmgen.queries.resume import resume
        from slurmgen.slurm.ids import cluster_label

        step, new = resume(self.client, self.target, Journal(find_home()))
        if new is None:
            shown = cluster_label(self.target.cluster, str(step.requeue_target))
            return Report(notes=(step.message, f"done; follow it with: slurmgen status {shown}"))
        label = cluster_label(self.client.cluster, new)  # the cluster it was resubmitted to: the job's own
        return Report(
            out=(label,), notes=(step.message, f"submitted job {label}; follow it with: slurmgen status {label}")
        )

    def point(self, index: int) -> JobHandle:
        raise UsageError(f"--point: {self.label!r} is not a sweep (see `slurmgen status {self.label}`)")

    def goodput(self) -> Goodput:
        from slurmgen.queries.goodput_view import job_goodput

        known = self.target.entry is not None and bool(self.target.entry.log_dir)
        return job_goodput(self.target, None if known else self.client)  # no Slurm query for a job of the journal
