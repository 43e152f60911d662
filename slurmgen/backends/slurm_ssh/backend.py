"""Slurm over ssh as a backend (`submit --cluster NAME` for a cluster profile with a `host`): the project's snapshot
and slurmgen's in-job modules stored on the cluster (slurmgen.backends.slurm_ssh.placing), then one once-only remote
call per job or per array of a sweep (slurmgen.backends.slurm_ssh.once, through the one sweep path); its jobs'
handles run Slurm's commands there through the cluster's one shared connection (slurmgen.backends.slurm_ssh.job,
a sweep's: slurmgen.backends.slurm_ssh.sweep)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import DryRun, Followed, Request, Submitted, Warn, unsupported
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.backends.slurm_ssh.snapshot import Snapshot
    from slurmgen.backends.slurm_ssh.survey import Survey
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec
    from slurmgen.spec.profile import ClusterProfile

NOT_THERE_YET = "--cluster with a host submits over ssh: --test-only and --wait are not there yet"


class SlurmSsh:
    name = "ssh"
    cannot: Mapping[str, str] = {"would_run": NOT_THERE_YET, "follow": NOT_THERE_YET}

    def __init__(self, profile: ClusterProfile, base: Path | None = None) -> None:
        if profile.host is None:
            raise UsageError("a remote submission needs a cluster profile with a host")
        self.profile = profile
        self._base = base

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        """The script as it would be submitted (it starts in the snapshot, whose place on the cluster is its content
        hash) and the snapshot's summary: its files and bytes, and what is new for the cluster's store, asked in one
        read-only round trip with the job's Python (refused below the floor, as submit refuses it); "unknown" when
        the cluster does not answer. Nothing is uploaded or written there."""
        from slurmgen.backends.slurm_ssh.placing import check_python, not_code, placed_script, refuse_unset
        from slurmgen.backends.slurm_ssh.snapshot import package_snapshot, snapshot_path, take_snapshot
        from slurmgen.backends.slurm_ssh.survey import survey
        from slurmgen.remote.transport import TransportError, transport_for
        from slurmgen.script.directives import sq
        from slurmgen.spec.secrets import mask

        profile, compile_spec = self.profile, self._compiler(request, warn)
        assert profile.host is not None
        spec, _ = compile_spec([])
        refuse_unset(spec, request.source.path, os.environ, " (the submit would be refused)")  # before any call
        package = package_snapshot()
        snap = take_snapshot(Path.cwd(), profile.snapshot_limit_mb, not_code(spec)) if request.snapshot else None
        for line in () if snap is None else (snap.note, *snap.left_out):
            if line is not None:
                warn(line)
        wanted = [package] if snap is None else [package, snap]
        lines: list[str] = []
        found: Survey | None = None
        try:
            transport = transport_for(profile.name, profile.host, profile.control_persist)
            found = survey(transport, profile.workdir, wanted, spec.python if request.check else None, snap,
                           profile.shared_workdir)  # fmt: skip
        except TransportError as exc:
            lines.append(f"note: what is new for the cluster's store is unknown: {exc}")
        if found is not None:
            check_python(spec, found.python, request.source.path, profile.name, warn)
        if snap is not None:
            lines.append(snapshot_summary(snap, found))
        workdir = profile.workdir if found is None or not found.workdir else found.workdir
        shipped = snapshot_path(workdir, package)
        sent = "unknown" if found is None else "stored already" if package.digest in found.stored else "new"
        lines.append(f"slurmgen's modules: {len(package.files)} files, {package.size} bytes; for the store: {sent}")
        code_dir = request.code_dir if snap is None else snapshot_path(workdir, snap)
        spec, script = placed_script(compile_spec, spec, workdir, code_dir, shipped)
        lines.append(f"would submit: sbatch job.sbatch in {workdir}/runs/{spec.name}/<token> on cluster "
                     f"{profile.name} ({profile.host}); nothing was sent")  # fmt: skip
        return DryRun(mask(script, spec.env, sq), tuple(lines))

    def would_run(self, request: Request, warn: Warn) -> str:
        raise unsupported(self, "would_run")

    def follow(self, label: str, progress: Callable[[str], None]) -> Followed:
        raise unsupported(self, "follow")

    def launch(self, request: Request, warn: Warn) -> Submitted:
        """The snapshot of the project around the current directory (or, with ``request.code_dir``, the job starts
        there on the cluster); one job, or a sweep's arrays."""
        import time

        from slurmgen.backends.slurm_ssh.placing import send_remote
        from slurmgen.journal import Journal, home, new_token
        from slurmgen.remote.transport import transport_for

        source, profile = request.source, self.profile
        compile_spec = self._compiler(request, warn)
        assert profile.host is not None
        spec, _ = compile_spec([])
        if spec.time is None or spec.recovery.expedite:  # asked of the cluster only when the spec needs it
            from slurmgen.submission.site_checks import check_expedite, say_partition_time

            check_expedite(spec, str(source.path), self.site_client())
            say_partition_time(spec, self.site_client(), warn)
        done = send_remote(
            compile_spec,
            profile,
            transport_for(profile.name, profile.host, profile.control_persist),
            project=Path.cwd() if request.snapshot else None,
            code_dir=None if request.snapshot else request.code_dir,
            token=new_token(),
            journal=Journal(home() if self._base is None else self._base),
            spec_path=source.path.resolve(),
            clock=time.time,
            warn=warn,
            overrides=source.overrides,
            check=request.check,
            args=source.args,
        )
        up = done.upload
        sent = "" if up is None else f" ({up.files_sent} files, {up.bytes_sent} bytes sent)"
        code = (
            f"snapshot {done.snapshot[:12]}{' dirty' if done.dirty else ''}{sent}" if done.snapshot else done.code_dir
        )
        if done.arrays:
            message = (f"submitted sweep {done.job_id} on cluster {done.cluster} as array job(s) "
                       f"{', '.join(done.arrays)}; code {code}; logs in {done.log_dir}; follow it with: slurmgen "
                       f"status {done.job_id}")  # fmt: skip
        else:
            message = f"submitted job {done.job_id} on cluster {done.cluster}; code {code}; logs in {done.log_dir}"
        return Submitted(done.job_id, message)

    def _compiler(self, request: Request, warn: Warn) -> Callable[[list[str]], tuple[JobSpec, str]]:
        """The compile step of a remote submission: ``compile_spec([])`` checks the spec alone (its output, chdir
        and setup place the run; no render), ``compile_spec(extra)`` renders with the run's placement; the spec's
        warnings are said once."""
        source, profile = request.source, self.profile
        if not request.snapshot and request.code_dir is None:
            raise UsageError(
                "--no-snapshot: say where the code is on the cluster with --set chdir=/path/on/the/cluster"
            )
        said: set[str] = set()
        alone: list[JobSpec] = []  # the spec checked alone, kept: launch and send_remote both ask for it
        from slurmgen.script.build import build_file, note_line

        def compile_spec(extra: list[str]) -> tuple[JobSpec, str]:
            """The spec alone first (its output, chdir and setup place the run; no render), then with the run's
            placement the script: the spec's warnings and notes are said once."""
            from slurmgen.script.build import check_file

            if not extra and alone:
                return alone[0], ""  # checked once per submission, however often it is asked
            if not extra:
                checked = check_file(source.path, list(source.overrides), Path.cwd(), profile, source.args)
                if request.one is not None and checked.spec.sweep is not None:
                    raise UsageError(request.one)
                if request.many is not None and checked.spec.sweep is None:
                    raise UsageError(request.many)
                said.update(str(p) for p in checked.warnings)
                for problem in checked.warnings:
                    warn(f"warning: {problem}")
                for note in checked.notes:  # the render below has the same notes: said here, once
                    warn(note_line(note))
                alone.append(checked.spec)
                return checked.spec, ""
            built = build_file(
                source.path, [*source.overrides, *extra], request.templates, Path.cwd(), profile, source.args
            )
            for problem in built.warnings:  # the script doctor's, on the script that is submitted
                if str(problem) not in said:
                    warn(f"warning: {problem}")
            return built.spec, built.script

        return compile_spec

    def site_client(self) -> SlurmClient:
        """Slurm's commands run on the cluster through its one shared connection."""
        from slurmgen.backends.slurm_ssh.remote_status import transport_runner
        from slurmgen.remote.transport import transport_for
        from slurmgen.slurm.client import SlurmClient

        profile = self.profile
        assert profile.host is not None
        return SlurmClient(run=transport_runner(transport_for(profile.name, profile.host, profile.control_persist)))

    def job(self, label: str) -> JobHandle:
        """A job id or a sweep id, as `launch` printed it, of a job the journal says was submitted to this cluster."""
        from slurmgen.backends.slurm_ssh.job import RemoteJob
        from slurmgen.backends.slurm_ssh.sweep import RemoteSweep
        from slurmgen.journal import Journal, find, home
        from slurmgen.slurm.ids import parse_cluster_job
        from slurmgen.submission.sweep_record import is_sweep, load_record
        from slurmgen.submission.targets import Target

        base = home() if self._base is None else self._base
        jobs = Journal(base).jobs()
        if any(is_sweep(e) and e.extra.get("sweep") == label.strip() for e in jobs):
            return RemoteSweep(load_record(label.strip(), jobs), self.profile, base)
        cluster, job = parse_cluster_job(label)
        entry = find(jobs, str(job), cluster)
        if entry is None or entry.extra.get("profile") != self.profile.name:
            raise UsageError(f"job {label.strip()}: not submitted to cluster {self.profile.name} from here (see "
                             "`slurmgen status`)")  # fmt: skip
        return RemoteJob(Target(job, entry, named=cluster), entry, self.profile, base)


def snapshot_summary(snap: Snapshot, found: Survey | None) -> str:
    """`submit --dry-run`'s line on the snapshot: files, bytes, and what the cluster's store lacks of it. Pure."""
    head = f"snapshot {snap.digest[:12]}{' dirty' if snap.dirty else ''}: {len(snap.files)} files, {snap.size} bytes"
    if found is None:
        return f"{head}; new for the cluster's store: unknown (the cluster did not answer)"
    if snap.digest in found.stored:
        return f"{head}; new for the cluster's store: nothing (stored already)"
    sizes = {f.digest: f.size for f in snap.files if f.digest in found.missing}
    return f"{head}; new for the cluster's store: {len(sizes)} files, {sum(sizes.values())} bytes"
