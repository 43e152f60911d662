"""Local emulation as a backend (`slurmgen run`): the rendered script runs on this machine, with Slurm emulated
around it (slurmgen.local), in the foreground; its jobs' handles (`local-3`, a local array or sweep) read the local
journal and the runner's control directory (slurmgen.backends.emulated.job, slurmgen.backends.emulated.group)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import DryRun, Followed, Request, Submitted, Warn, unsupported

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.slurm.client import SlurmClient

CANNOT = {
    "dry_run": "a local run has no dry run: `slurmgen render SPEC` prints the script it would run",
    "would_run": "--test-only asks a Slurm scheduler; a local run starts at once on this machine",
    "follow": "a local run runs in the foreground: it has ended when `slurmgen run` returns",
    "site_client": "a local run emulates Slurm around one job; `slurmgen doctor` asks a cluster's Slurm",
}


class Emulated:
    name = "local"
    cannot: Mapping[str, str] = CANNOT

    def __init__(self, base: Path | None = None) -> None:
        self._base = base

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        raise unsupported(self, "dry_run")

    def would_run(self, request: Request, warn: Warn) -> str:
        raise unsupported(self, "would_run")

    def follow(self, label: str, progress: Callable[[str], None]) -> Followed:
        raise unsupported(self, "follow")

    def launch(self, request: Request, warn: Warn) -> Submitted:
        """Run the spec here to its end (`slurmgen run SPEC`, without rehearsals); its local id and exit code."""
        from slurmgen.errors import UsageError
        from slurmgen.journal import home
        from slurmgen.local import local_jobs
        from slurmgen.local.command import run_local
        from slurmgen.local.setup import Options
        from slurmgen.slurm.ids import local_label

        source = request.source
        if request.one is not None or request.many is not None:
            from slurmgen.spec.load import load_file

            swept = load_file(source.path, list(source.overrides), source.args).spec.sweep is not None
            if request.one is not None and swept:
                raise UsageError(request.one)
            if request.many is not None and not swept:
                raise UsageError(request.many)
        templates = None if request.templates is None else str(request.templates)
        options = Options(None, None, source.overrides, None, templates, None, None, source.profile, source.args)
        code = run_local(source.path, options, warn)
        ran = local_jobs.records(home() if self._base is None else self._base)
        if not ran:
            raise UsageError(f"{source.path}: the local run recorded no job")
        last = ran[-1]
        sweep = last.entry.extra.get(local_jobs.SWEEP_EXTRA)
        label = sweep if isinstance(sweep, str) else local_label(last.key.partition("_")[0])
        return Submitted(label, f"ran job {label} here; exit code {code}", code)

    def site_client(self) -> SlurmClient:
        raise unsupported(self, "site_client")

    def job(self, label: str) -> JobHandle:
        """A local id (`local-3`, `local-3_0`) or a local sweep's id, as `launch` printed it."""
        from slurmgen.backends.emulated.lookup import by_local_id, by_sweep_id
        from slurmgen.errors import UsageError
        from slurmgen.journal import home
        from slurmgen.local.local_jobs import records

        base = home() if self._base is None else self._base
        ran = records(base)
        found = by_local_id(base, ran, label) or by_sweep_id(base, ran, label)
        if found is None:
            raise UsageError(f"{label.strip()}: no job or sweep of that id ran here")
        return found
