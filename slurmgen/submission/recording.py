"""What the journal keeps of a planned submission (one entry per event: submitting, then submitted, failed or
unknown), and a record after sbatch ran that never hides its outcome."""

from __future__ import annotations

import time

from slurmgen.journal import Entry, Journal
from slurmgen.slurm.ids import JobId
from slurmgen.submission.plan import Plan


def entry(p: Plan, event: str, job_id: JobId | None = None, cluster: str | None = None, **extra: object) -> Entry:
    return Entry(
        event=event,
        token=p.token,
        name=p.spec.name,
        spec=str(p.source.resolve()),
        run_dir=str(p.run_dir),
        script=str(p.script_path),
        time=time.time(),
        job_id=None if job_id is None else str(job_id),
        cluster=cluster,
        log_dir=str(p.log_dir.absolute()),
        array=p.spec.array is not None or p.spec.sweep is not None,
        extra={**({"args": list(p.args)} if p.args else {}), **extra},
    )


def record_after(journal: Journal, e: Entry) -> tuple[str, ...]:
    """Append after sbatch ran: a failure must not hide the outcome (the job exists, or sbatch's own error)."""
    try:
        journal.append(e)
    except OSError as exc:
        return (f"job {e.job_id or '?'} is not in the journal {journal.path}: {exc.strerror or exc}",)
    return ()
