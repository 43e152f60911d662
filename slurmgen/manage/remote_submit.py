"""`slurmgen submit --cluster NAME` for a profile with a `host`: the snapshot and slurmgen's own in-job modules are
stored on the cluster (slurmgen.remote.snapshot), then one idempotent remote call writes the script and runs sbatch.

Never submitted twice: the call holds a lock in the run's directory on the cluster (named by the submission's
token), answers the job id written there by an earlier try, else looks for a job whose comment carries the token
(an sbatch whose reply was lost with the connection), and only then runs sbatch. So when the connection drops
mid-submit, the same call is simply made again with the same token.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import SchedulerError, UsageError
from slurmgen.journal import TOKEN_PREFIX, Entry, Journal
from slurmgen.manage.plan import comment_for
from slurmgen.remote.snapshot import Upload, package_snapshot, snapshot_path, stored, take_snapshot, upload
from slurmgen.remote.transport import Transport, TransportError
from slurmgen.spec.model import JobSpec
from slurmgen.spec.profile import ClusterProfile

TRIES = 3  # a dropped connection is retried with the same token: the remote call is idempotent


@dataclass(frozen=True)
class RemoteSubmission:
    job_id: str
    cluster: str
    run_dir: str  # on the cluster
    log_dir: str
    code_dir: str  # where the job starts: the snapshot, or the directory given with --no-snapshot
    snapshot: str | None
    commit: str | None
    dirty: bool
    upload: Upload | None


def remote_overrides(spec: JobSpec, workdir: str, code_dir: str | None) -> list[str]:
    """`--set` values that place a remote run: it starts in the snapshot, and writes its logs and state under the
    workdir (the snapshot is read-only). Pure."""
    out = []
    if code_dir is not None:
        start = posixpath.join(code_dir, spec.chdir) if spec.chdir else code_dir
        out.append(f"chdir={json.dumps(start)}")
    if not posixpath.isabs(spec.output):
        out.append(f"output={json.dumps(posixpath.join(workdir, 'runs', spec.name, spec.output))}")
    return out


def version_setup(python: str, shipped: str, version: str) -> str:
    """The setup line that puts the shipped slurmgen first and says so when the job's environment has another."""
    check = shlex.quote("import slurmgen; print(slurmgen.__version__)")
    return (
        f"export PYTHONPATH={shlex.quote(shipped)}${{PYTHONPATH:+:$PYTHONPATH}}; "
        f"_sg_v=$(cd / && PYTHONPATH= {shlex.quote(python)} -c {check} 2>/dev/null) && "
        f'[ "$_sg_v" != {shlex.quote(version)} ] && echo "slurmgen: this job runs slurmgen {version} shipped with it '
        f'({shipped}); its environment has slurmgen $_sg_v installed" >&2 || true'
    )


_SUBMIT = """set -u
r={run}; mkdir -p "$r" {log_dir} || exit 3; cd "$r" || exit 3
exec 9>"$r/lock"; flock 9
if [ -s jobid ]; then cat jobid; exit 0; fi
j=$(squeue --me --noheader --format='%i %k' 2>/dev/null | awk -v t={marker} '$NF == t {{print $1; exit}}')
if [ -n "$j" ]; then echo "$j" > jobid; cat jobid; exit 0; fi
cat > job.sbatch.tmp && mv job.sbatch.tmp job.sbatch || exit 3
PYTHONPATH={ship}${{PYTHONPATH:+:$PYTHONPATH}} sbatch --parsable {args} job.sbatch > jobid.tmp || exit 5
cut -d';' -f1 jobid.tmp > jobid && rm -f jobid.tmp && cat jobid
"""


def submit_script(
    run_dir: str, log_dir: str, shipped: str, spec: JobSpec | None, token: str, extra: tuple[str, ...] = ()
) -> str:
    """The one remote call that submits (see the module's docstring). ``spec`` None: a resubmission, whose comment
    is the token alone (the script keeps its own #SBATCH lines)."""
    comment = comment_for(spec, token) if spec is not None else f"{TOKEN_PREFIX}{token}"
    args = shlex.join([f"--comment={comment}", *extra])
    return _SUBMIT.format(
        run=shlex.quote(run_dir),
        log_dir=shlex.quote(log_dir),
        marker=shlex.quote(f"{TOKEN_PREFIX}{token}"),
        ship=shlex.quote(shipped),
        args=args,
    )


Compile = Callable[[list[str]], tuple[JobSpec, str]]


def submit_remote(
    compile_spec: Compile,
    profile: ClusterProfile,
    transport: Transport,
    *,
    project: Path | None,
    code_dir: str | None,
    token: str,
    journal: Journal,
    spec_path: Path,
    clock: Callable[[], float],
    warn: Callable[[str], object] = lambda line: None,
) -> RemoteSubmission:
    """Store the code, then submit once. ``project``: the directory to snapshot (None: --no-snapshot, the job starts
    in ``code_dir``, already on the cluster). ``compile_spec(extra_overrides)`` validates, and renders when given
    overrides."""
    from importlib.metadata import version

    __version__ = version("slurmgen-torch")  # the distribution's name (pyproject.toml); `slurmgen` is its package
    workdir = profile.workdir
    spec, _ = compile_spec([])
    if spec.sweep is not None:
        raise UsageError(
            f"{spec_path}: sweep: a sweep over ssh (--cluster {profile.name}) is not supported yet; submit it on the "
            "cluster's login node, or give the profile no host"
        )
    snap = up = None
    package = package_snapshot()
    wanted = [package]
    if project is not None:
        snap = take_snapshot(project, profile.snapshot_limit_mb)
        wanted.append(snap)
    have = stored(wanted, transport, workdir)  # one round trip when nothing changed
    if snap is not None:
        up = Upload(snapshot_path(workdir, snap), 0, 0) if snap.digest in have else upload(snap, transport, workdir)
        code_dir = up.path
    shipped = snapshot_path(workdir, package)
    if package.digest not in have:
        upload(package, transport, workdir)
    extra = remote_overrides(spec, workdir, code_dir)
    setup = [*spec.setup, version_setup(spec.python, shipped, __version__)]
    spec, script = compile_spec([*extra, f"setup={json.dumps(setup)}"])
    run_dir = posixpath.join(workdir, "runs", spec.name, token)
    log_dir = spec.output
    record = {
        "snapshot": None if snap is None else snap.digest,
        "commit": None if snap is None else snap.commit,
        "dirty": None if snap is None else snap.dirty,
        "code_dir": code_dir,
        "profile": profile.name,  # the cluster profile: status, logs, cancel find the cluster again by it
    }

    base = Entry(event="submitting", token=token, name=spec.name, spec=str(spec_path), run_dir=run_dir,
                 script="job.sbatch", time=clock(), cluster=profile.name, log_dir=log_dir, extra=record)  # fmt: skip
    command = submit_script(run_dir, log_dir, shipped, spec, token)
    job_id = submit_once(transport, command, script.encode(), base, journal, clock, warn)
    return RemoteSubmission(
        job_id=job_id,
        cluster=profile.name,
        run_dir=run_dir,
        log_dir=log_dir,
        code_dir=str(code_dir),
        snapshot=None if snap is None else snap.digest,
        commit=None if snap is None else snap.commit,
        dirty=bool(snap and snap.dirty),
        upload=up,
    )


# The setup line version_setup wrote into the script: where the job's slurmgen was shipped.
_SHIPPED = re.compile(r"export PYTHONPATH=(\S+?)\$\{PYTHONPATH")


def resubmit_remote(
    transport: Transport,
    entry: Entry,
    resume_from: str,
    token: str,
    journal: Journal,
    clock: Callable[[], float],
    warn: Callable[[str], object] = lambda line: None,
) -> str:
    """`slurmgen resume` of a remote job that Slurm has forgotten: its script, as it ran (in its run directory on
    the cluster), submitted again with SLURMGEN_RESUME_FROM, through the same once-only remote call as a submit.
    The new job's id."""
    from slurmgen import contract

    got = transport.run(f"cat {shlex.quote(posixpath.join(entry.run_dir, 'job.sbatch'))}")
    script = got.stdout
    if got.returncode != 0 or not script:
        raise UsageError(f"the script job {resume_from} ran is gone from cluster {entry.cluster} "
                         f"({entry.run_dir}/job.sbatch); submit the spec again")  # fmt: skip
    found = _SHIPPED.search(script.decode(errors="replace"))
    shipped = found[1].strip("'") if found else ""
    run_dir = posixpath.join(posixpath.dirname(entry.run_dir), token)
    extra = (f"--export=ALL,{contract.RESUME_FROM}={resume_from}",)

    base = dataclasses.replace(entry, event="submitting", token=token, run_dir=run_dir, script="job.sbatch",
                               time=clock(), job_id=None, extra={**entry.extra, "resumes": resume_from})  # fmt: skip
    command = submit_script(run_dir, entry.log_dir or "", shipped, None, token, extra)
    return submit_once(transport, command, script, base, journal, clock, warn)


def submit_once(
    transport: Transport,
    command: str,
    script: bytes,
    base: Entry,
    journal: Journal,
    clock: Callable[[], float],
    warn: Callable[[str], object],
) -> str:
    """Make the once-only submit call (submit_script), recorded in the journal as ``base`` (submitting, then
    submitted or failed); a dropped connection is asked again with the same token. The job id."""
    journal.append(base)
    for attempt in range(1, TRIES + 1):
        try:
            got = transport.run(command, script, timeout=120)
            break
        except TransportError as exc:
            if attempt == TRIES:
                raise
            warn(f"note: {exc}; asking again with the same submission token {base.token} (never a second job)")
    text = got.stdout.decode(errors="replace").strip()
    if got.returncode != 0 or not text.split(";")[0].isdigit():
        said = (got.stderr.strip().splitlines() or [text or f"status {got.returncode}"])[-1]
        journal.append(dataclasses.replace(base, event="failed", time=clock()))
        raise SchedulerError(f"cluster {base.cluster}: sbatch refused the job: {said}")
    job_id = text.split(";")[0]
    journal.append(dataclasses.replace(base, event="submitted", time=clock(), job_id=job_id))
    return job_id
