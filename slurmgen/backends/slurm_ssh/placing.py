"""`slurmgen submit --cluster NAME` for a profile with a `host`: the snapshot and slurmgen's own in-job modules are
stored on the cluster (slurmgen.backends.slurm_ssh.snapshot), then one idempotent remote call
(slurmgen.backends.slurm_ssh.once) writes the script and runs sbatch: once for a job, once per array for a sweep
(slurmgen.backends.slurm_ssh.sweep_arrays).
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from slurmgen.backends.slurm_ssh.once import forwarded_names, once_script, secret_stdin, send_once
from slurmgen.backends.slurm_ssh.snapshot import Upload, package_snapshot, snapshot_path, take_snapshot, upload
from slurmgen.backends.slurm_ssh.survey import survey
from slurmgen.errors import UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.python_check import PythonCheck, before_queue
from slurmgen.remote.transport import Transport
from slurmgen.slurm.ids import cluster_label
from slurmgen.spec.model import JobSpec
from slurmgen.spec.profile import ClusterProfile


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
    arrays: tuple[str, ...] = ()  # a sweep's array job ids (job_id is then the sweep's id)


def remote_overrides(spec: JobSpec, workdir: str, code_dir: str | None) -> list[str]:
    """`--set` values that place a remote run: it starts in the snapshot, and writes its logs and state under the
    workdir (the snapshot is read-only). Pure."""
    out = []
    if code_dir is not None:
        start = posixpath.join(code_dir, spec.chdir) if spec.chdir else code_dir
        out.append(f"chdir={json.dumps(start)}")
    if not posixpath.isabs(spec.output):
        out.append(f"output={json.dumps(posixpath.join(workdir, 'runs', spec.name, spec.output))}")
    if spec.error is not None and not posixpath.isabs(spec.error):  # beside the output: the snapshot is read-only
        out.append(f"error={json.dumps(posixpath.join(workdir, 'runs', spec.name, spec.error))}")
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


def not_code(spec: JobSpec) -> tuple[str, ...]:
    """What a local run of the spec writes in the project (logs, stderr, resume state): never in a snapshot. Pure."""
    return tuple(p for p in (spec.output, spec.error, spec.preemption.state_dir) if p is not None)


Compile = Callable[[list[str]], tuple[JobSpec, str]]


@dataclass(frozen=True)
class Placed:
    """A spec made ready to submit on the cluster: its code stored there, and its script rendered to start in it."""

    spec: JobSpec
    script: str
    run_dir: str  # on the cluster
    shipped: str  # slurmgen's own in-job modules, on the cluster
    code_dir: str | None
    snapshot: str | None
    commit: str | None
    dirty: bool
    upload: Upload | None
    record: dict[str, object]  # what the journal keeps about the code (Entry.extra)


def placed_script(compile_spec: Compile, spec: JobSpec, workdir: str, code_dir: str | None, shipped: str) -> tuple[
        JobSpec, str]:  # fmt: skip
    """The spec and script of a job that starts in ``code_dir`` with slurmgen's modules from ``shipped``."""
    from importlib.metadata import version

    __version__ = version("slurmgen-torch")  # the distribution's name (pyproject.toml); `slurmgen` is its package
    extra = remote_overrides(spec, workdir, code_dir)
    setup = [*spec.setup, version_setup(spec.python, shipped, __version__)]
    return compile_spec([*extra, f"setup={json.dumps(setup)}"])


def check_python(
    spec: JobSpec, found: PythonCheck | None, spec_path: Path, cluster: str, warn: Callable[[str], object]
) -> None:
    """The job's Python as the login node answered (None: not asked, --no-check): refused below the floor."""
    if found is not None:
        before_queue(found, str(spec_path), f"on the login node of cluster {cluster}", bool(spec.setup), warn)


def refuse_unset(spec: JobSpec, spec_path: Path, environ: Mapping[str, str], after: str = "") -> None:
    """The line a submit on the login node gives for a `from_env` variable unset here: over ssh too, before the
    upload (sbatch would carry nothing, and the job would run without it). ``after``: the end of the line."""
    from slurmgen.spec.secrets import missing

    if (absent := missing(spec.env, environ)) is not None:
        raise UsageError(f"{spec_path}: {absent}{after}")


def place(
    compile_spec: Compile, profile: ClusterProfile, transport: Transport, project: Path | None, code_dir: str | None,
    token: str, check: bool = True, spec_path: Path = Path("spec"), warn: Callable[[str], object] = lambda line: None,
    environ: Mapping[str, str] = os.environ,
) -> Placed:  # fmt: skip
    """Store the code on the cluster (one round trip when nothing changed; the job's Python is asked in it, and
    refused below the floor before anything is sent), then render the script that starts in it; a `from_env`
    variable unset in ``environ`` is refused before anything is asked or sent. ``project``: the
    directory to snapshot (None: --no-snapshot, the job starts in ``code_dir``, already on the cluster).
    ``compile_spec(extra_overrides)`` validates, and renders when given overrides."""
    spec, _ = compile_spec([])
    refuse_unset(spec, spec_path, environ)
    snap = up = None
    package = package_snapshot()
    wanted = [package]
    if project is not None:
        snap = take_snapshot(project, profile.snapshot_limit_mb, not_code(spec))
        for line in (snap.note, *snap.left_out):
            if line is not None:
                warn(line)
        wanted.append(snap)
    found = survey(transport, profile.workdir, wanted, spec.python if check else None, None,  # one round trip
                   profile.shared_workdir)  # fmt: skip
    workdir = found.workdir or profile.workdir  # absolute: `~` and a relative workdir are in the remote home
    check_python(spec, found.python, spec_path, profile.name, warn)
    have = found.stored
    if snap is not None:
        up = Upload(snapshot_path(workdir, snap), 0, 0) if snap.digest in have else upload(snap, transport, workdir)
        code_dir = up.path
    shipped = snapshot_path(workdir, package)
    if package.digest not in have:
        upload(package, transport, workdir)
    spec, script = placed_script(compile_spec, spec, workdir, code_dir, shipped)
    record: dict[str, object] = {
        "snapshot": None if snap is None else snap.digest,
        "commit": None if snap is None else snap.commit,
        "dirty": None if snap is None else snap.dirty,
        "code_dir": code_dir,
        "profile": profile.name,  # the cluster profile: status, logs, cancel find the cluster again by it
    }
    return Placed(spec, script, posixpath.join(workdir, "runs", spec.name, token), shipped, code_dir,
                  None if snap is None else snap.digest, None if snap is None else snap.commit,
                  bool(snap and snap.dirty), up, record)  # fmt: skip


def send_remote(
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
    overrides: tuple[str, ...] = (),
    check: bool = True,
    args: tuple[str, ...] = (),
    environ: Mapping[str, str] = os.environ,
) -> RemoteSubmission:
    """Store the code (place), then submit once: one job, or a sweep's arrays (sweep_arrays), each through
    the same once-only remote call."""
    placed = place(compile_spec, profile, transport, project, code_dir, token, check, spec_path, warn, environ)
    spec = placed.spec
    log_dir = spec.output
    base = Entry(event="submitting", token=token, name=spec.name, spec=str(spec_path), run_dir=placed.run_dir,
                 script="job.sbatch", time=clock(), cluster=profile.name, log_dir=log_dir,
                 extra={**placed.record, **({"args": list(args)} if args else {})})  # fmt: skip
    arrays: tuple[str, ...] = ()
    names = forwarded_names(spec.env)
    secrets = secret_stdin(names, environ)  # on ssh's stdin, before the script: never in a file or an argv
    if spec.sweep is None:
        command = once_script(placed.run_dir, log_dir, placed.shipped, spec, token, error_dir=spec.error,
                              secrets=names)  # fmt: skip
        sent = send_once(transport, command, secrets + placed.script.encode(), base, journal, clock, warn)
        job_id = cluster_label(sent.cluster, sent.job_id)  # `name:123` on a multi-cluster site
    else:
        from slurmgen.backends.slurm_ssh.sweep_arrays import send_sweep_remote

        start = placed.code_dir or "/"
        job_id, arrays = send_sweep_remote(transport, spec, placed.script, start, placed.run_dir, placed.shipped,
                                             base, spec_path, overrides, journal, clock, warn,
                                             (names, secrets))  # fmt: skip
    return RemoteSubmission(
        job_id=job_id,
        cluster=profile.name,
        run_dir=placed.run_dir,
        log_dir=log_dir,
        code_dir=str(placed.code_dir),
        snapshot=placed.snapshot,
        commit=placed.commit,
        dirty=placed.dirty,
        upload=placed.upload,
        arrays=arrays,
    )
