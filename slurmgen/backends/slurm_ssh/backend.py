"""Slurm over ssh as a backend (`submit --cluster NAME` for a cluster profile with a `host`): the project's snapshot
and slurmgen's in-job modules stored on the cluster (slurmgen.backends.slurm_ssh.placing), then one once-only remote
call per job or per array of a sweep (slurmgen.backends.slurm_ssh.once, through the one sweep path); its jobs'
handles run Slurm's commands there through the cluster's one shared connection (slurmgen.backends.slurm_ssh.job,
a sweep's: slurmgen.backends.slurm_ssh.sweep)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import DryRun, Followed, Request, Submitted, Warn, unsupported
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec
    from slurmgen.spec.profile import ClusterProfile

NOT_THERE_YET = "--cluster with a host submits over ssh: --dry-run, --test-only and --wait are not there yet"


class SlurmSsh:
    name = "ssh"
    cannot: Mapping[str, str] = {"dry_run": NOT_THERE_YET, "would_run": NOT_THERE_YET, "follow": NOT_THERE_YET}

    def __init__(self, profile: ClusterProfile, base: Path | None = None) -> None:
        if profile.host is None:
            raise UsageError("a remote submission needs a cluster profile with a host")
        self.profile = profile
        self._base = base

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        raise unsupported(self, "dry_run")

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
        from slurmgen.script.build import build_file

        source, profile = request.source, self.profile
        if not request.snapshot and request.code_dir is None:
            raise UsageError(
                "--no-snapshot: say where the code is on the cluster with --set chdir=/path/on/the/cluster"
            )
        said: set[str] = set()

        def compile_spec(extra: list[str]) -> tuple[JobSpec, str]:
            """The spec alone first (its output, chdir and setup place the run; no render), then with the run's
            placement the script: the spec's warnings are said once."""
            from slurmgen.script.build import check_file

            if not extra:
                checked = check_file(source.path, list(source.overrides), Path.cwd(), profile, source.args)
                if request.one is not None and checked.spec.sweep is not None:
                    raise UsageError(request.one)
                if request.many is not None and checked.spec.sweep is None:
                    raise UsageError(request.many)
                said.update(str(p) for p in checked.warnings)
                for problem in checked.warnings:
                    warn(f"warning: {problem}")
                return checked.spec, ""
            built = build_file(
                source.path, [*source.overrides, *extra], request.templates, Path.cwd(), profile, source.args
            )
            for problem in built.warnings:  # the script doctor's, on the script that is submitted
                if str(problem) not in said:
                    warn(f"warning: {problem}")
            return built.spec, built.script

        assert profile.host is not None
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
        from slurmgen.slurm.ids import parse_job_id
        from slurmgen.submission.sweep_record import is_sweep, load_record
        from slurmgen.submission.targets import Target

        base = home() if self._base is None else self._base
        jobs = Journal(base).jobs()
        if any(is_sweep(e) and e.extra.get("sweep") == label.strip() for e in jobs):
            return RemoteSweep(load_record(label.strip(), jobs), self.profile, base)
        job = parse_job_id(label)
        entry = find(jobs, str(job))
        if entry is None or entry.extra.get("profile") != self.profile.name:
            raise UsageError(f"job {label.strip()}: not submitted to cluster {self.profile.name} from here (see "
                             "`slurmgen status`)")  # fmt: skip
        return RemoteJob(Target(job, entry), entry, self.profile, base)
