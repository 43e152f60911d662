"""`slurmgen.Job`: a handle on one Slurm job (or array), from the process that submitted it or any other.

A handle holds only the job id: every question goes to Slurm when asked, so two processes attached to one job
always agree. The journal (where `slurmgen submit` records its jobs, found from the working directory or
SLURMGEN_HOME) adds the log directory and the script; a job not submitted from here still answers through
`scontrol show job`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmgen.jobs.control import CancelStep, RequeueStep
    from slurmgen.jobs.resume import ResumeStep
    from slurmgen.jobs.targets import Target
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.ids import JobId
    from slurmgen.slurm.showjob import JobInfo


def target_of(text: str) -> Target:
    """A job id (123, 123_4, 123+1) or a spec path / job name meaning its last submission, from the journal."""
    from slurmgen.jobs.journal import Journal, find_home
    from slurmgen.jobs.targets import resolve

    journal = Journal(find_home())
    return resolve(text, journal.jobs(), journal.path)


def records(client: SlurmClient, target: Target) -> list[JobInfo]:
    """scontrol's records of the job; only the asked task's when one array task is named. One query."""
    infos = client.show_jobs(target.job)
    if target.job.array_task is not None:
        infos = [i for i in infos if i.job_id == target.job.without_step()]
    return infos


class Job:
    """One Slurm job. `Job("123")`, `Job(123)` or `Job("123_4")` attaches from any process; no query is made
    until a method asks. Methods raise the errors of slurmgen.errors (SchedulerError when Slurm refuses,
    SchedulerMissing when there is no Slurm client)."""

    def __init__(self, job_id: str | int | JobId, *, client: SlurmClient | None = None) -> None:
        from slurmgen.slurm.ids import as_job_id

        self._job = as_job_id(job_id).without_step()
        self._client = client
        self._target: Target | None = None

    @classmethod
    def from_spec(cls, path: str | Path, *, client: SlurmClient | None = None) -> Job:
        """The last submission of a spec file (or job name) recorded in the journal. No Slurm query."""
        return cls.for_target(target_of(str(path)), client=client)

    @classmethod
    def for_target(cls, target: Target, *, client: SlurmClient | None = None) -> Job:
        """The handle of a resolved target (the CLI's JOB argument), keeping its journal entry."""
        job = cls(target.job, client=client)
        job._target = target
        return job

    @property
    def id(self) -> str:
        """Slurm's spelling of the job id: 123, or 123_4 for one array task."""
        return str(self._job)

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and other._job == self._job

    def __hash__(self) -> int:
        return hash(self._job)

    # --- internals shared with the CLI ------------------------------------------------------------------

    @property
    def client(self) -> SlurmClient:
        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client

    @property
    def target(self) -> Target:
        """The job with its journal entry (when submitted from here). Reads the journal once; no Slurm query."""
        if self._target is None:
            from slurmgen.jobs.journal import Journal, find, find_home
            from slurmgen.jobs.targets import Target

            self._target = Target(self._job, find(Journal(find_home()).jobs(), str(self._job)))
        return self._target

    # --- questions --------------------------------------------------------------------------------------

    def state(self) -> str:
        """Slurm's state word: PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED...;
        UNKNOWN when Slurm does not know the job (any more); an array's tasks fold into one word (query.fold).
        One scontrol query."""
        from slurmgen.api.query import fold

        return fold([info.state_name for info in records(self.client, self.target)])

    def wait(self, timeout: float | None = None, *, sleep: Callable[[float], None] = time.sleep) -> str:
        """Wait until the job has ended for good (a requeued job passes through PENDING again: that is not an end)
        and return its final state word. Polls `scontrol show job` every 0.25 s while the job changes, backing off
        to every 2 s while nothing does. Raises TimeoutError after ``timeout`` seconds (the job goes on), and
        SchedulerError when Slurm forgets the job meanwhile."""
        from slurmgen.jobs.wait import follow

        deadline = None if timeout is None else time.monotonic() + timeout

        def pause(seconds: float) -> None:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {self.id} did not end within {timeout:g} s")
                seconds = min(seconds, left)
            sleep(seconds)

        return follow(self.client, self.target.job, lambda infos: None, sleep=pause).state

    @property
    def exit_code(self) -> int | None:
        """The job's exit code once it has ended (128+N when signal N ended it; the worst task's for an array);
        None while it runs or when Slurm does not know it. One scontrol query."""
        from slurmgen.jobs.wait import done, outcome

        infos = records(self.client, self.target)
        return outcome(infos).exit_code if done(infos) else None

    def logs(self, rank: int | None = None, node: str | None = None) -> str:
        """Everything the job printed so far, every run of it (requeued runs append): the batch log, the per-node
        logs and the ranks' logs, each after a `==> file <==` header; only rank N's program, or one node's log,
        when asked. One scontrol query. Raises UsageError when there is no such log (yet)."""
        return self.log_bytes(rank, node).decode("utf-8", errors="replace")

    def log_bytes(self, rank: int | None = None, node: str | None = None) -> bytes:
        chunks: list[bytes] = []
        self.write_logs(chunks.append, rank, node)
        return b"".join(chunks)

    def write_logs(self, out: Callable[[bytes], None], rank: int | None = None, node: str | None = None) -> None:
        """Stream the job's logs to `out`, a chunk at a time (`slurmgen logs`: a log of any size, little memory)."""
        from slurmgen.errors import UsageError
        from slurmgen.jobs import logs as lg

        if node is not None:
            lg.check_node_name(node)
        if node is not None and rank is not None:
            raise UsageError("--node and --rank exclude each other: a rank's log holds only that rank's output")
        infos = self.client.show_jobs(self.target.job)
        batch = lg.batch_logs(self.target, infos)
        found = lg.select(batch, node, rank)
        if not found:
            raise UsageError(lg.missing_message(self.target, batch, node, infos, rank))
        lg.Follower(out=out, cwd=Path.cwd()).poll(found)

    def history(self) -> list[dict[str, Any]]:
        """One dict per run of the job, oldest first, from its run history (kept beside its logs, so it outlives
        Slurm's memory): run, start, end (epoch seconds), nodes, exit_code, cause, requeued_by, saves... No Slurm
        query for a job submitted from here; one scontrol query to find the logs of another job."""
        from dataclasses import asdict

        from slurmgen import run_history
        from slurmgen.jobs.history import job_log_dirs

        target = self.target
        known = target.entry is not None and bool(target.entry.log_dir)
        infos = [] if known else self.client.show_jobs(target.job)
        runs: list[dict[str, Any]] = []
        for log_dir in job_log_dirs(target, infos):
            for run in run_history.History.load(str(log_dir)).runs():
                runs.append({"log_dir": str(log_dir), **asdict(run)})
        return runs

    # --- actions ----------------------------------------------------------------------------------------

    def cancel(self, signal: str | None = None) -> None:
        """Cancel the job (nothing happens when it ended already), or send it a signal (USR2: a clean exit;
        TERM: save and exit), routed as `slurmgen cancel --signal` routes it. One scontrol query and one scancel."""
        self.cancel_step(signal)

    def cancel_step(self, signal: str | None = None, to: str | None = None) -> CancelStep | None:
        """cancel, and what was done (for the CLI's message); None when the job had ended already."""
        from slurmgen.jobs.control import cancel_job, trapped_signals
        from slurmgen.signal_names import require_signal_name

        sig = None if signal is None else require_signal_name(signal, "--signal")
        return cancel_job(self.client, self.target.job, sig, to, trapped_signals(self.target.entry))

    def requeue(self, *, hold: bool = False, finished: bool = False) -> None:
        """Requeue the running job: it starts again from the top of its script with the same id (and the same
        SLURMGEN_RUN_ID). ``finished`` also takes back a job that ended. One scontrol query and one requeue."""
        self.requeue_step(hold=hold, finished=finished)

    def requeue_step(self, *, hold: bool = False, finished: bool = False) -> RequeueStep:
        """requeue, and what was done (for the CLI's message)."""
        from slurmgen.jobs.control import requeue_job

        return requeue_job(self.client, self.target.job, hold=hold, finished=finished)

    def resume(self) -> Job:
        """Bring back a job that ended before its work was done, from its last saved state: requeued while Slurm
        knows it (this job returned), else its script submitted again (the new job returned; it keeps the run
        identity). Two or three Slurm calls."""
        step, new = self.resume_step()
        del step
        return self if new is None else new

    def resume_step(self) -> tuple[ResumeStep, Job | None]:
        """resume, and what was done (for the CLI's message) with the new job when the script was submitted again."""
        from slurmgen.jobs.journal import Journal, find_home
        from slurmgen.jobs.resume import resume

        step, new = resume(self.client, self.target, Journal(find_home()))
        return step, None if new is None else Job(new, client=self._client)
