"""Plan and submit. `plan()` is pure: it renders and decides where everything goes and the exact sbatch argv.
`submit()` carries a plan out: writes the run directory, creates the log and state directories, runs sbatch,
and records the job in the journal. `--dry-run` prints the plan; nothing else differs.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import Problem, SchedulerError, UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.spec import JobSpec

SCRIPT_NAME = "job.sbatch"
SPEC_COPY = "spec.yaml"
RESOLVED = "spec.resolved.json"
TOKEN_PREFIX = "slurmgen:"


@dataclass(frozen=True)
class Plan:
    spec: JobSpec
    source: Path  # the spec file as given
    script: str
    warnings: tuple[Problem, ...]
    token: str
    run_dir: Path
    workdir: Path  # where the job starts: spec.chdir, else the directory sbatch runs in
    log_dir: Path  # the directory of the batch log; must exist before sbatch runs
    state_dir: Path
    sbatch_argv: tuple[str, ...]

    @property
    def script_path(self) -> Path:
        return self.run_dir / SCRIPT_NAME


def new_token(clock: Callable[[], float] = time.time) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock()))
    return f"{stamp}-{secrets.token_hex(3)}"


def plan(
    source: Path,
    spec: JobSpec,
    script: str,
    warnings: tuple[Problem, ...],
    base: Path,
    cwd: Path,
    token: str,
    test_only: bool = False,
) -> Plan:
    """Where the run lives and what sbatch gets. No effects."""
    workdir = (cwd / spec.chdir) if spec.chdir else cwd
    run_dir = base / "runs" / spec.name / token
    comment = f"{TOKEN_PREFIX}{token}"
    user_comment = dict(spec.sbatch).get("comment")
    if user_comment:
        comment = f"{user_comment} {comment}"  # the command line beats the script: keep the user's words
    argv = ["sbatch", "--parsable", *(["--test-only"] if test_only else []), f"--comment={comment}"]
    argv.append(str(run_dir / SCRIPT_NAME))
    return Plan(
        spec=spec,
        source=source,
        script=script,
        warnings=warnings,
        token=token,
        run_dir=run_dir,
        workdir=workdir,
        log_dir=workdir / spec.output,
        state_dir=workdir / spec.preemption.state_dir,
        sbatch_argv=tuple(argv),
    )


def ensure_writable(directory: Path, what: str) -> None:
    """Create `directory` and prove a file can be made in it, before sbatch: Slurm would lose the log silently."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".slurmgen-probe-"):
            pass
    except OSError as exc:
        raise UsageError(
            f"{what} {directory}: cannot write there ({exc.strerror or exc}); fix the permissions or change the "
            "spec field"
        ) from None


def write_run_dir(p: Plan) -> None:
    from slurmgen.files import write_atomic

    p.run_dir.mkdir(mode=0o700, parents=True, exist_ok=False)
    write_atomic(p.script_path, p.script, mode=0o600)
    write_atomic(p.run_dir / SPEC_COPY, p.source.read_text(encoding="utf-8"), mode=0o600)
    import json

    resolved = {"source": str(p.source.resolve()), "digest": p.spec.digest, "spec": p.spec.to_dict()}
    write_atomic(p.run_dir / RESOLVED, json.dumps(resolved, indent=2, sort_keys=True) + "\n", mode=0o600)


def entry(p: Plan, event: str, job_id: str | None = None, cluster: str | None = None, **extra: object) -> Entry:
    return Entry(
        event=event,
        token=p.token,
        name=p.spec.name,
        spec=str(p.source.resolve()),
        run_dir=str(p.run_dir),
        script=str(p.script_path),
        time=time.time(),
        job_id=job_id,
        cluster=cluster,
        extra=dict(extra),
    )


def prepare(p: Plan) -> None:
    """Every effect before sbatch: directories, permissions, the run directory."""
    ensure_writable(p.log_dir, "output")
    if p.spec.preemption.enabled:
        ensure_writable(p.state_dir, "preemption.state_dir")
    write_run_dir(p)


def submit(p: Plan, client: object, journal: Journal) -> tuple[str, str | None]:
    """Carry out a plan; returns (job id, cluster). Never submits twice: a timeout is resolved by looking for
    the submission token in the queue, not by trying again."""
    from slurmgen.slurm import SchedulerTimeout, SlurmClient

    assert isinstance(client, SlurmClient)
    prepare(p)
    journal.append(entry(p, "submitting"))
    try:
        submitted = client.sbatch(p.script_path, list(p.sbatch_argv[2:-1]))
    except SchedulerTimeout:
        found = find_by_token(client, p.token)
        if found is None:
            journal.append(entry(p, "unknown"))
            raise SchedulerError(
                f"sbatch did not answer in time and no job with comment {TOKEN_PREFIX}{p.token} is in the queue "
                "yet; it was probably not submitted. Check `squeue --me` before submitting again"
            ) from None
        journal.append(entry(p, "submitted", found, recovered=True))
        return found, None
    except SchedulerError as exc:
        journal.append(entry(p, "failed", error=str(exc)))
        raise
    journal.append(entry(p, "submitted", submitted.job_id, submitted.cluster))
    return submitted.job_id, submitted.cluster


def find_by_token(client: object, token: str) -> str | None:
    """The job that carries our submission token in its comment, if sbatch submitted it after all."""
    from slurmgen.slurm import SlurmClient

    assert isinstance(client, SlurmClient)
    for row in client.squeue_comments():
        if row[1].endswith(f"{TOKEN_PREFIX}{token}"):
            return row[0]
    return None


def submit_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    from slurmgen.slurm import clean_submit_env

    return clean_submit_env(os.environ if environ is None else environ)
