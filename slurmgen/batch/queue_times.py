"""What Slurm says about this run's wait, asked once at its start (batch/commands.py `begin`), for the report's
queue figures (slurmgen/goodput/): SubmitTime, EligibleTime and StartTime of the job's record, and its TimeLimit
for the checkpoint advice. On a requeue Slurm gives the job a new SubmitTime and EligibleTime (the requeue's),
so each run's StartTime - SubmitTime is that run's own wait (scontrol(1), "show job").

One `scontrol show job` per run; a failed or timed-out question records nothing and the run goes on.
"""

from __future__ import annotations

from slurmgen.errors import SlurmgenError
from slurmgen.job_context.context import JobContext
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import parse_datetime


def queue_times(ctx: JobContext, client: SlurmClient | None) -> dict[str, float] | None:
    """{"submit", "eligible", "start": epoch seconds, "limit": seconds}, each where Slurm knows it; None if unknown."""
    if ctx.in_container or ctx.key is None:
        return None
    try:
        info = (client or SlurmClient(timeout=10.0)).show_job(ctx.key)
    except (SlurmgenError, ValueError):
        return None
    if info is None:
        return None
    found: dict[str, float] = {}
    eligible = parse_datetime(info.fields.get("EligibleTime", ""))
    for name, value in (("submit", info.submit_time), ("eligible", eligible), ("start", info.start_time)):
        if value is not None:
            found[name] = round(value.timestamp(), 3)  # Slurm prints local time, as this process reads it
    if info.time_limit:
        found["limit"] = float(info.time_limit)
    return found
