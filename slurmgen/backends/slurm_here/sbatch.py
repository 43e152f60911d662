"""Carrying out a plan (slurmgen.submission.plan): check and create the log and state directories, write the run
directory, run sbatch once, and record the job in the journal. `--test-only` asks the scheduler about the same plan
instead.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from slurmgen.atomic import write_bytes, write_text
from slurmgen.errors import Problem, SchedulerError, SchedulerMissing, SpecError, UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal, unresolved
from slurmgen.slurm.client import SchedulerTimeout, SlurmClient
from slurmgen.slurm.ids import JobId
from slurmgen.slurm.parse import TestOnly
from slurmgen.submission.plan import RESOLVED, SPEC_COPY, Plan

# After an sbatch timeout, look for the submission this many times, this far apart: the controller that was too
# slow to answer sbatch may record the job a moment later.
LOOKUPS = 3
LOOKUP_DELAY = 2.0
# A "submitting" entry this old without an outcome means slurmgen died during sbatch: worth a look in the queue.
STALE = 300.0


@dataclass(frozen=True)
class Submission:
    job_id: JobId
    cluster: str | None
    recovered: bool = False  # sbatch timed out, and the job was found in the queue by its token
    others: tuple[JobId, ...] = ()  # more jobs carrying the same token (should never happen; reported)
    problems: tuple[str, ...] = ()  # e.g. the journal could not be written after sbatch succeeded


# --- effects ------------------------------------------------------------------------------------------------


def ensure_writable(directory: Path, field: str, source: Path) -> None:
    """Create ``directory`` and prove a file can be made in it, before sbatch: Slurm does not create the log's
    directory, and a job whose log cannot be opened fails without a word (toil #4633)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".slurmgen-probe-{os.getpid()}-{os.urandom(4).hex()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecError(
            [Problem(str(source), field, f"cannot write to {directory} ({reason}); fix it or choose another path")]
        ) from None


def _private_dirs(path: Path, base: Path) -> None:
    """mkdir -p with mode 0700 for every directory created (Path.mkdir gives parents the default mode)."""
    missing = [d for d in (path, *path.parents) if d == base or base in d.parents]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            if directory == path:
                raise
    os.chmod(path, 0o700)


def write_run_dir(p: Plan, base: Path) -> None:
    _private_dirs(p.run_dir, base)
    write_text(p.script_path, p.script)
    write_bytes(p.run_dir / SPEC_COPY, p.source.read_bytes() if p.spec_text is None else p.spec_text)
    resolved = {
        "source": str(p.source.resolve()),
        "overrides": list(p.overrides),
        "digest": p.spec.digest,
        "workdir": str(p.workdir),
        "submit_dir": str(p.submit_dir),
        "log_dir": str(p.log_dir),
        "spec": p.spec.to_dict(),
    }
    write_text(p.run_dir / RESOLVED, json.dumps(resolved, indent=2, sort_keys=True) + "\n")


def prepare(p: Plan, base: Path) -> None:
    """Every effect before sbatch: the log and state directories (checked), then the run directory."""
    ensure_writable(p.log_dir, "output", p.source)
    if p.state_dir is not None:
        ensure_writable(p.state_dir, "preemption.state_dir", p.source)
    try:
        write_run_dir(p, base)
    except OSError as exc:
        raise UsageError(
            f"cannot write the run directory {p.run_dir} ({exc.strerror or exc}); submit from a writable directory "
            f"or set SLURMGEN_HOME"
        ) from None


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
        extra=dict(extra),
    )


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


def submit(
    p: Plan,
    client: SlurmClient,
    journal: Journal,
    *,
    which: Which = on_path,
    sleep: Callable[[float], None] = time.sleep,
) -> Submission:
    """Carry out a plan. Never submits twice: a timeout is resolved by looking for the submission's token in
    the queue, not by trying again."""
    require_sbatch(which)
    from slurmgen.spec.secrets import missing

    if (absent := missing(p.spec.env, os.environ)) is not None:
        raise UsageError(f"{p.source}: {absent}")  # sbatch would propagate nothing: the job would lack it
    prepare(p, journal.base)
    try:
        journal.append(entry(p, "submitting"))
    except OSError as exc:
        raise UsageError(f"cannot write the journal {journal.path} ({exc.strerror or exc})") from None
    try:
        submitted = client.sbatch(p.script_path, p.sbatch_args)
    except SchedulerTimeout as exc:
        found = find_by_token(client, p.spec.name, p.token, sleep)
        if not found:
            _record(journal, entry(p, "unknown", error=str(exc)))
            raise SchedulerTimeout(
                f"sbatch gave no answer within {client.timeout:g} s, and no job with the comment "
                f"{TOKEN_PREFIX}{p.token} is in the queue: it was probably not submitted. Before submitting again, "
                f"check with: squeue --me --format='%i %k' | grep {p.token}"
            ) from None
        problem = _record(journal, entry(p, "submitted", found[0], recovered=True))
        return Submission(found[0], None, recovered=True, others=tuple(found[1:]), problems=problem)
    except (SchedulerError, SchedulerMissing) as exc:
        _record(journal, entry(p, "failed", error=str(exc)))
        raise
    problem = _record(journal, entry(p, "submitted", submitted.job_id, submitted.cluster))
    return Submission(submitted.job_id, submitted.cluster, problems=problem)


def _record(journal: Journal, e: Entry) -> tuple[str, ...]:
    """Append after sbatch ran: a failure must not hide the outcome (the job exists, or sbatch's own error)."""
    try:
        journal.append(e)
    except OSError as exc:
        return (f"job {e.job_id or '?'} is not in the journal {journal.path}: {exc.strerror or exc}",)
    return ()


def find_by_token(
    client: SlurmClient, name: str, token: str, sleep: Callable[[float], None] = time.sleep
) -> list[JobId]:
    """The jobs whose comment ends in our submission token (at most one, unless something is very wrong)."""
    marker = f"{TOKEN_PREFIX}{token}"
    for attempt in range(LOOKUPS):
        if attempt:
            sleep(LOOKUP_DELAY)
        try:
            rows = client.comments(name)
        except SchedulerError:
            continue  # the controller is still busy; a lookup is safe to repeat, a submission is not
        found = sorted({job for job, comment in rows if comment.split()[-1:] == [marker]}, key=str)
        if found:
            return found
    return []


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


def find_unresolved(
    entries: list[Entry], client: SlurmClient, clock: Callable[[], float] = time.time
) -> tuple[list[Entry], list[str]]:
    """Look in the queue for submissions whose outcome the journal does not know (sbatch timed out, or slurmgen
    was killed during it), by their tokens. Writes nothing: returns the entries found, as "submitted" entries
    with their job ids, and notes for the user."""
    now = clock()
    pending = [e for e in unresolved(entries) if e.event == "unknown" or now - e.time > STALE]
    if not pending:
        return [], []
    try:
        rows = client.comments()
    except SchedulerError as exc:
        return [], [f"warning: cannot look for {len(pending)} unresolved submission(s) in the queue: {exc}"]
    by_marker = {comment.split()[-1]: job for job, comment in rows if comment.split()}
    found, notes = [], []
    for e in pending:
        job = by_marker.get(f"{TOKEN_PREFIX}{e.token}")
        if job is not None:
            found.append(replace(e, event="submitted", job_id=str(job), time=now, extra={"recovered": True}))
            notes.append(f"note: the submission of {e.name} (token {e.token}) whose sbatch timed out is job {job}")
    return found, notes


def settle_unresolved(journal: Journal, client: SlurmClient, clock: Callable[[], float] = time.time) -> list[str]:
    """Record in the journal the unresolved submissions that turned up in the queue (submit does this, not
    status: reading commands never write). Returns notes for the user."""
    found, notes = find_unresolved(journal.entries(), client, clock)
    for entry in found:
        journal.append(entry)
    return notes
