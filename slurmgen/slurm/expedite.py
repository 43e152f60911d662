"""Whether a site takes an expedited requeue (sbatch --requeue=expedite), asked before a job that wants one waits
in the queue: `slurmgen doctor` and `slurmgen submit` say it in one line.

Sources (Slurm 25.11): sbatch(1) `--requeue[=expedite]`: "the job be immediately eligible to start again, and be
scheduled with the highest possible priority. This will only happen if expedited requeues are allowed globally
with the SlurmctldParameters=enable_expedited_requeue"; src/slurmctld/job_mgr.c `_job_create` refuses such a job
where the site does not allow it ("Expedited requeue requested but not enabled", ESLURM_NOT_SUPPORTED), and
`_set_job_requeue_exit_value` requeues a job with the flag whenever its batch script exits non-zero, and
`batch_requeue_fini` holds it unless an epilog failed (the batch shell clears the flag first: batch/commands.py).
Older sbatch takes `--requeue` without a value and rejects the option. Pure and standard-library only.
"""

from __future__ import annotations

from slurmgen.slurm.ids import version_tuple
from slurmgen.slurm.site_config import EXPEDITE_SINCE, SiteConfig

FIELD = "recovery.expedite"


def expedite_problem(site: SiteConfig) -> str | None:
    """Why this site cannot give a job an expedited requeue, or None when it can."""
    found = version_tuple(site.version)
    if found is not None and found < EXPEDITE_SINCE:
        return (f"Slurm {site.version} has no expedited requeue (sbatch --requeue=expedite came with 25.11; "
                f"this sbatch rejects it)")  # fmt: skip
    if not site.expedited_requeue:
        return ("this cluster does not allow it (SlurmctldParameters has no enable_expedited_requeue; slurmctld "
                "would refuse the job)")  # fmt: skip
    return None


def expedite_refusal(site: SiteConfig, source: str) -> str | None:
    """The one line `submit` refuses a job with, naming the file, the field and the fix; None when it may go."""
    problem = expedite_problem(site)
    if problem is None:
        return None
    return f"{source}: {FIELD}: {problem}; fix: remove {FIELD}, or ask the admins to enable it"
