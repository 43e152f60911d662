"""A continuation job: the work of a job that Slurm will end PREEMPTED whatever it does goes on in a new job.

On Slurm 24.05 and later a job preempted with PreemptMode=CANCEL and a grace time carries the GRACE_PREEMPT flag
from the grace's start (src/interfaces/preempt.c, `_job_check_grace_internal`), and since commit a689104d15
`_job_complete` (src/slurmctld/job_mgr.c) ends every job with that flag PREEMPTED. `scontrol requeue` does not
clear it, so a requeued run that finishes all the work would still end PREEMPTED, and an `afterok` dependency would
never fire. Instead of requeueing, the batch shell submits the same script again (the copy Slurm runs, $0 of the
batch shell) as a new job with SLURMGEN_RESUME_FROM=<this job's key>: it resumes this job's state, keeps its run
identity for trackers (the script reads LOG_DIR of the old key's run-id) and, once done, ends COMPLETED. The old
job ends PREEMPTED, which it was.

Where the new job is found again: the run history of the old job (event `continued`: the new job id), the batch
log (one line), and the journal of the directory the job was submitted from, when it has one (a `submitted` entry
like `slurmgen resume` writes, with extra `continues`), so `slurmgen status` and `history` of the spec find it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from slurmgen import contract, run_history
from slurmgen.interruption.states import RequeueResult
from slurmgen.job_context.context import JobContext
from slurmgen.requeue import RequeueOutcome, record

if TYPE_CHECKING:
    from slurmgen.slurm.client import SlurmClient


def submit_continuation(key: str, cause: str, ctx: JobContext, *, by: str, client: SlurmClient | None = None
                        ) -> RequeueOutcome:  # fmt: skip
    """Submit this job's script again to continue from its state: `continued` (recorded), or `failed` (the state
    is kept and `slurmgen resume` can still bring the work back)."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.journal import TOKEN_PREFIX
    from slurmgen.slurm.client import SlurmClient

    script = ctx.batch_script  # the batch shell's $0: the script Slurm runs (its spooled copy)
    if not script or not os.path.isfile(script):
        return RequeueOutcome(
            RequeueResult.FAILED, f"cannot submit a continuation of job {key}: its script is not readable here"
        )
    claim = _claim(ctx)
    if claim is None:
        return RequeueOutcome(
            RequeueResult.CONTINUED, f"the continuation of run {ctx.run} is submitted by the batch shell already"
        )
    workdir = ctx.submit_dir or os.getcwd()
    # afterany: the new job starts only once every process of this one is gone, so a save that this run is still
    # finishing (the grace's end: SIGTERM, then KillWait) is never read half-done or raced by the new run.
    args = [f"--chdir={workdir}", f"--export=ALL,{contract.RESUME_FROM}={key}", f"--dependency=afterany:{key}"]
    if ctx.array_task_id:
        args.append(f"--array={ctx.array_task_id}")  # the same task (a sweep's point) of a new array
    token = _journal_token()
    if token:
        args.append(f"--comment={TOKEN_PREFIX}{token}")
    # The environment goes with the new job (--export=ALL; SlurmClient drops Slurm's job variables), less the
    # rendezvous this script exported, which the new job would take for the user's own port, and less the
    # submitting shell's SLURM_CLUSTERS (sbatch exported it into the job): the continuation belongs on this job's
    # cluster, the one whose configuration Slurm set as the job's SLURM_CONF (src/common/env.c, setup_env).
    dropped = ("MASTER_ADDR", "MASTER_PORT", "SLURM_CLUSTERS")
    inherited = {name: value for name, value in ctx.environ.items() if name not in dropped}
    asker = client or SlurmClient(env=inherited, timeout=60)
    try:
        submitted = asker.sbatch(script, args)
    except SlurmgenError as exc:
        if claim:  # free the run for another try (the run's end, after the SIGTERM step)
            with contextlib.suppress(OSError):
                os.unlink(claim)
        why = f"could not submit a continuation of job {key} ({exc}): its resume state is kept; slurmgen resume " \
              f"{key} brings the work back"  # fmt: skip
        return RequeueOutcome(RequeueResult.FAILED, why)
    new = str(submitted.job_id) + (f"_{ctx.array_task_id}" if ctx.array_task_id else "")
    record(ctx, by, run_history.CONTINUED, cause=cause, job=new)
    _journal(ctx.environ, key, new, token, workdir)
    said = f"submitted job {new} to continue job {key} from its state ({cause}; a requeue would end PREEMPTED on " \
           "this Slurm whatever the run does)"  # fmt: skip
    return RequeueOutcome(RequeueResult.CONTINUED, said)


def _claim(ctx: JobContext) -> str | None:
    """One continuation per run, whoever asks first: the run's end, or the batch shell's SIGTERM step when the
    grace ends before the run's end is reached (the two can overlap). The claim is a file created with O_EXCL in
    the run's log directory, removed again if the submission fails. Returns its path ("" when no claim can be
    made: no log directory, a full or read-only disk; the work must still go on), or None when another has it."""
    if not ctx.log_dir:
        return ""
    path = os.path.join(ctx.log_dir, f".continuation-run{ctx.run}")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return None
    except OSError:
        return ""
    return path


def _journal_token() -> str:
    from slurmgen.journal import new_token

    return new_token()


def _journal(env: Mapping[str, str], key: str, new: str, token: str, workdir: str) -> None:
    """A `submitted` entry for the new job in the journal of the directory the old job came from, cloned from the
    old job's entry; nothing when that directory has no journal or no entry for the old job."""
    from slurmgen.errors import SlurmgenError
    from slurmgen.journal import Entry, Journal, find_home

    try:
        journal = Journal(find_home(env, workdir), warn=lambda _line: None)
        old = journal.find(key.split("_")[0])
        if old is None:
            return
        journal.append(Entry(event="submitted", token=token, name=old.name, spec=old.spec, run_dir=old.run_dir,
                             script=old.script, time=time.time(), job_id=new, cluster=old.cluster,
                             log_dir=old.log_dir, array=False, extra={"continues": key}))  # fmt: skip
    except (OSError, ValueError, SlurmgenError):
        return
