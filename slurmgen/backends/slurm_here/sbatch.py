"""The Slurm of this machine: a plan (slurmgen.submission.plan) carried out by running sbatch here, once, with every
event recorded in the journal; a sweep's arrays go through the same call, one each (slurmgen.submission.sweep_submit).
`--test-only` asks the scheduler about the same plan instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from slurmgen.errors import SchedulerError, SchedulerMissing, UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal
from slurmgen.slurm.client import ClusterUnreachable, SchedulerTimeout, SlurmClient
from slurmgen.slurm.ids import JobId
from slurmgen.slurm.parse import TestOnly
from slurmgen.submission.plan import Plan
from slurmgen.submission.recording import entry, record_after
from slurmgen.submission.recovery import find_by_token
from slurmgen.submission.run_dir import ensure_dirs, prepare
from slurmgen.submission.sweep_plan import SweepPlan
from slurmgen.submission.sweep_submit import SweepSubmission, send_sweep, sweep_extra

Record = Callable[..., Entry]  # (event, job id, cluster, **extra) -> the journal entry of that event


@dataclass(frozen=True)
class Submission:
    job_id: JobId
    cluster: str | None
    recovered: bool = False  # sbatch timed out, and the job was found in the queue by its token
    others: tuple[JobId, ...] = ()  # more jobs carrying the same token (should never happen; reported)
    problems: tuple[str, ...] = ()  # e.g. the journal could not be written after sbatch succeeded


Which = Callable[[str], str | None]


def on_path(command: str) -> str | None:
    """shutil.which without importing shutil (this is every submission's path): the first executable file."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_sbatch(which: Which) -> None:
    if which("sbatch") is None:
        raise SchedulerMissing(
            "sbatch not found: Slurm's client is not installed here (or not on PATH). "
            "`slurmgen submit --dry-run` shows the script and the sbatch command; `slurmgen render` writes the script"
        )


def send_job(
    p: Plan,
    client: SlurmClient,
    journal: Journal,
    *,
    which: Which = on_path,
    sleep: Callable[[float], None] = time.sleep,
) -> Submission:
    """Carry out a plan of one job. Never submits twice: a timeout is resolved by looking for the submission's token
    in the queue, not by trying again."""
    require_sbatch(which)
    from slurmgen.spec.secrets import missing
    from slurmgen.submission.site_checks import check_expedite

    if (absent := missing(p.spec.env, os.environ)) is not None:
        raise UsageError(f"{p.source}: {absent}")  # sbatch would propagate nothing: the job would lack it
    check_expedite(p.spec, str(p.source), client)
    prepare(p, journal.base)
    try:
        return sbatch_once(p, p.sbatch_args, p.token, partial(entry, p), client, journal, sleep)
    except ClusterUnreachable as exc:
        if any(option in ("clusters", "cluster") for option, _ in p.spec.sbatch):  # the spec's (or its profile's)
            raise ClusterUnreachable(f"{p.source}: sbatch.clusters: {exc}") from None
        raise


def sbatch_once(
    p: Plan,
    args: tuple[str, ...],
    token: str,
    record: Record,
    client: SlurmClient,
    journal: Journal,
    sleep: Callable[[float], None] = time.sleep,
) -> Submission:
    """One sbatch of the plan's script with ``args``, recorded as ``record`` builds each event (submitting, then
    submitted, failed or unknown); a timeout is settled by the token in the job's comment."""
    try:
        journal.append(record("submitting"))
    except OSError as exc:
        raise UsageError(f"cannot write the journal {journal.path} ({exc.strerror or exc})") from None
    try:
        submitted = client.sbatch(p.script_path, args)
    except SchedulerTimeout as exc:
        found, cluster = [], None
        for cluster in named_clusters(p.spec.sbatch, args, client.env):  # where sbatch may have put the job
            found = find_by_token(client.on_cluster(cluster), p.spec.name, token, sleep)
            if found:
                break
        if not found:
            record_after(journal, record("unknown", error=str(exc)))
            raise SchedulerTimeout(
                f"sbatch gave no answer within {client.timeout:g} s, and no job with the comment "
                f"{TOKEN_PREFIX}{token} is in the queue: it was probably not submitted. Before submitting again, "
                f"check with: squeue --me --format='%i %k' | grep {token}"
            ) from None
        problem = record_after(journal, record("submitted", found[0], cluster, recovered=True))
        return Submission(found[0], cluster, recovered=True, others=tuple(found[1:]), problems=problem)
    except (SchedulerError, SchedulerMissing) as exc:
        record_after(journal, record("failed", error=str(exc)))
        raise
    problem = record_after(journal, record("submitted", submitted.job_id, submitted.cluster))
    return Submission(submitted.job_id, submitted.cluster, problems=problem)


def named_clusters(
    directives: tuple[tuple[str, str | None], ...], args: tuple[str, ...], env: Mapping[str, str]
) -> list[str | None]:
    """The clusters an sbatch may have placed its job on, in the order it reads them (sbatch(1): the command line,
    then SLURM_CLUSTERS, then the script's #SBATCH lines); [None], the local cluster, when none is named."""
    given = [a.split("=", 1)[1] for a in args if a.startswith(("--clusters=", "--cluster="))]
    given += [env["SLURM_CLUSTERS"]] if env.get("SLURM_CLUSTERS") else []
    given += [value for option, value in directives if option in ("clusters", "cluster") and value]
    names = [name.strip() for name in given[0].split(",") if name.strip()] if given else []
    return list(dict.fromkeys(names)) or [None]


def send_sweep_here(
    sp: SweepPlan,
    client: SlurmClient,
    journal: Journal,
    *,
    which: Which = on_path,
    sleep: Callable[[float], None] = time.sleep,
    fresh: bool = True,
) -> SweepSubmission:
    """A sweep's arrays through this machine's sbatch (the one sweep path, slurmgen.submission.sweep_submit).
    ``fresh``: write the run directory (a resubmission reuses the first one's script, so every point keeps its
    values)."""
    require_sbatch(which)
    p = sp.plan
    if fresh:
        prepare(p, journal.base)
    else:
        ensure_dirs(p)

    def record_of(k: int) -> Record:
        def record(event: str, job: JobId | None = None, cluster: str | None = None, **extra: object) -> Entry:
            e = entry(p, event, job, cluster, **extra)
            return replace(e, token=sp.token(k), array=True, extra={**sweep_extra(sp, k), **e.extra})

        return record

    def send(k: int, args: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        done = sbatch_once(p, args, sp.token(k), record_of(k), client, journal, sleep)
        return str(done.job_id), done.problems

    return send_sweep(sp, send)


def would_run(p: Plan, client: SlurmClient, *, which: Which = on_path) -> TestOnly:
    """`sbatch --test-only`: would the scheduler accept the job, and when and where would it start? Writes
    nothing but a temporary copy of the script. A job that can never run raises SchedulerError."""
    import tempfile

    require_sbatch(which)
    fd, tmp = tempfile.mkstemp(prefix=f"{p.spec.name}-", suffix=".sbatch")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(p.script)
        try:
            return client.sbatch(Path(tmp), p.sbatch_args, test_only=True)
        except SchedulerTimeout:
            raise
        except SchedulerError as exc:
            raise SchedulerError(f"the job cannot run on this cluster: {exc}") from None
    finally:
        os.unlink(tmp)
