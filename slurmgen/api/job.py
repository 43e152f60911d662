"""`slurmgen.Job`: a handle on one job (a Slurm job or array, or a job run here), from the process that started it or
any other. It asks the job interface (slurmgen.backends.interface), as the CLI does.

A handle holds only the job id: every question goes to Slurm (or the local journal) when asked, so two processes
attached to one job always agree. The journal (where `slurmgen submit` records its jobs, found from the working
directory or SLURMGEN_HOME) adds the log directory and the script; a job not submitted from here still answers
through `scontrol show job`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.slurm.ids import JobId


class Job:
    """One job, of any kind: a Slurm job (`Job("123")`, `Job(123)`, `Job("123_4")`) or a job `slurmgen run` ran
    here (`Job("local-3")`, `Job("local-3_0")`). Attaches from any process; nothing is read or asked until a
    method asks. Methods raise the errors of slurmgen.errors (SchedulerError when Slurm refuses, SchedulerMissing
    when there is no Slurm client, UsageError for a local id this directory's journal does not know)."""

    def __init__(self, job_id: str | int | JobId, *, client: SlurmClient | None = None) -> None:
        from slurmgen.backends.registry import claimed
        from slurmgen.slurm.ids import as_job_id, cluster_label, local_label, parse_cluster_job, parse_local_id

        local = parse_local_id(job_id) if isinstance(job_id, str) else None
        if isinstance(job_id, str) and claimed(job_id):  # an id of a kind that gives out its own
            self._id = job_id.strip()
        elif local is not None:
            self._id = local_label(local)
        elif isinstance(job_id, str):  # `alpha:123`: a job of cluster alpha of a multi-cluster site
            cluster, job = parse_cluster_job(job_id)
            self._id = cluster_label(cluster, job.without_step())
        else:
            self._id = str(as_job_id(job_id).without_step())
        self._client = client
        self._handle: JobHandle | None = None

    @classmethod
    def from_spec(cls, path: str | Path, *, client: SlurmClient | None = None) -> Job:
        """The last job of a spec file (or job name), submitted or run here, from the journals. No Slurm query."""
        from slurmgen.backends.registry import handle_of

        found = handle_of(str(path), client)
        job = cls(found.label, client=client)
        job._handle = found
        return job

    @property
    def id(self) -> str:
        """The job's id as every command takes it: 123, 123_4 for one array task, local-3 for a job run here,
        alpha:123 for a job of cluster alpha of a multi-cluster site."""
        return self._id

    def __repr__(self) -> str:
        return f"Job({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def handle(self) -> JobHandle:
        """The job interface's handle on this job (slurmgen.backends.interface): found on first use, through the
        journals."""
        if self._handle is None:
            from slurmgen.backends.registry import plain_handle

            self._handle = plain_handle(self._id, self._client)
        return self._handle

    # --- questions --------------------------------------------------------------------------------------

    def state(self) -> str:
        """The state word: PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED...;
        UNKNOWN when Slurm does not know the job (any more); an array's tasks fold into one word (query.fold).
        One scontrol query (none for a job run here)."""
        return self.handle.state()

    def wait(self, timeout: float | None = None, *, sleep: Callable[[float], None] = time.sleep) -> str:
        """Wait until the job has ended for good (a requeued job passes through PENDING again: that is not an end)
        and return its final state word. Polls `scontrol show job` every 0.25 s while the job changes, backing off
        to every 2 s while nothing does. Raises TimeoutError after ``timeout`` seconds (the job goes on), and
        SchedulerError when Slurm forgets the job meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def pause(seconds: float) -> None:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"job {self.id} did not end within {timeout:g} s")
                seconds = min(seconds, left)
            sleep(seconds)

        return self.handle.wait(pause)

    @property
    def exit_code(self) -> int | None:
        """The job's exit code once it has ended (128+N when signal N ended it; the worst task's for an array);
        None while it runs or when Slurm does not know it. One scontrol query (none for a job run here)."""
        return self.handle.exit_code()

    def logs(self, rank: int | None = None, node: str | None = None) -> str:
        """Everything the job printed so far, every run of it (requeued runs append): the batch log, the per-node
        logs and the ranks' logs, each after a `==> file <==` header; only rank N's program, or one node's log,
        when asked. "" while the job has printed nothing (pending). One scontrol query (none for a job run here).
        Raises UsageError when the job has logs, but none of that rank or node."""
        return self.log_bytes(rank, node).decode("utf-8", errors="replace")  # write_logs checks rank and node

    def log_bytes(self, rank: int | None = None, node: str | None = None) -> bytes:
        """What `logs` returns, as the raw bytes the job wrote and `slurmgen logs` prints: a program's output that is
        not UTF-8 comes back as it was written, where `logs` decodes it with U+FFFD in place of each bad byte."""
        chunks: list[bytes] = []
        self.write_logs(chunks.append, rank, node)
        return b"".join(chunks)

    def write_logs(self, out: Callable[[bytes], None], rank: int | None = None, node: str | None = None) -> None:
        """Stream the job's logs to `out`, a chunk at a time (a log of any size, little memory); nothing when the
        job has printed nothing yet."""
        from slurmgen.backends.log_reading import check_choice, write_logs

        check_choice(rank, node)
        write_logs(self.handle.logs(rank, node), out)

    def history(self) -> list[dict[str, Any]]:
        """One dict per run of the job, oldest first, from its run history (kept beside its logs, so it outlives
        Slurm's memory): run, start, end (epoch seconds), nodes, exit_code, cause, requeued_by, saves... No Slurm
        query for a job submitted or run from here; one scontrol query to find the logs of another job."""
        from dataclasses import asdict

        from slurmgen import run_history

        log_dirs, _ = self.handle.history_dirs()
        runs: list[dict[str, Any]] = []
        for log_dir in log_dirs:
            for run in run_history.History.load(str(log_dir)).runs():
                runs.append({"log_dir": str(log_dir), **asdict(run)})
        return runs

    def restarts(self) -> dict[str, int]:
        """{"requeues": ..., "restarts": ...}: the job's requeues (its runs after the first) and its step's restarts
        inside the allocation, over every run, as `slurmgen status` and `slurmgen report --json` count them. From
        the run history; both 0 before the job's first run has started."""
        from slurmgen import run_history

        log_dirs, _ = self.handle.history_dirs()
        requeues = restarts = 0
        for log_dir in log_dirs:
            history = run_history.History.load(str(log_dir))
            requeues += max(len(history.runs()) - 1, 0)
            restarts += history.step_restarts()
        return {"requeues": requeues, "restarts": restarts}

    def report(self) -> dict[str, Any]:
        """What `slurmgen report JOB --json` prints: goodput, wall_seconds, productive_seconds, buckets,
        queue_seconds, the runs, the timeline and the checkpoint advice (docs: goodput); an array job's as
        {"tasks": [...]}. From the run history: no Slurm query for a job submitted from here."""
        return self.handle.goodput().data

    # --- actions ----------------------------------------------------------------------------------------

    def cancel(self, signal: str | None = None) -> None:
        """Cancel the job (nothing happens when it ended already), or send it a signal (USR2: a clean exit;
        TERM: save and exit), routed as `slurmgen cancel --signal` routes it. One scontrol query and one scancel
        (a job run here: a request to its runner)."""
        self.handle.cancel(signal, None)

    def requeue(self, *, hold: bool = False, finished: bool = False) -> None:
        """Requeue the running job: it starts again from the top of its script with the same id (and the same
        SLURMGEN_RUN_ID). ``finished`` also takes back a job that ended. One scontrol query and one requeue."""
        self.handle.requeue(hold, finished)

    def resume(self) -> Job:
        """Bring back a job that ended before its work was done, from its last saved state: requeued while Slurm
        knows it (this job returned), else its script submitted again (the new job returned; it keeps the run
        identity). Two or three Slurm calls. A job run here runs again here, in this process, until it ends."""
        done = self.handle.resume(_ignore)
        return Job(done.out[0], client=self._client) if done.out else self


def _ignore(line: str) -> None:
    del line
