"""The Slurm of this machine as a backend: plan (slurmgen.submission.plan), dry-run, `--test-only`, submit (sbatch
here, once: slurmgen.backends.slurm_here.sbatch; a sweep's arrays through the one sweep path) and its jobs' handles
(slurmgen.backends.slurm_here.job, a sweep's: slurmgen.backends.slurm_here.sweep)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import DryRun, Followed, Request, Submitted, Warn
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec
    from slurmgen.submission.plan import Plan


class SlurmHere:
    name = "slurm"
    cannot: Mapping[str, str] = {}

    def __init__(self, client: SlurmClient | None = None, base: Path | None = None) -> None:
        self._client = client
        self._base = base

    @property
    def client(self) -> SlurmClient:
        if self._client is None:
            from slurmgen.slurm.client import SlurmClient

            self._client = SlurmClient()
        return self._client

    @property
    def base(self) -> Path:
        from slurmgen.journal import home

        return home() if self._base is None else self._base

    def plan(self, request: Request, warn: Warn) -> Plan:
        """Validate and render (warnings to ``warn``), then plan a submission recorded under the journal's
        directory; the plan keeps the exact bytes that were validated (the spec file is read once)."""
        from slurmgen.journal import new_token
        from slurmgen.submission.plan import plan
        from slurmgen.submission.source import compiled

        source = request.source
        built = compiled(source, request.templates, warn)
        if request.one is not None and built.spec.sweep is not None:
            raise UsageError(request.one)
        if request.many is not None and built.spec.sweep is None:
            raise UsageError(request.many)
        if request.check:
            self.check_python(source.path, built.spec, warn)
        return plan(source.path, built.spec, built.script, self.base, Path.cwd(), new_token(), source.overrides,
                    built.text, source.args)  # fmt: skip

    def check_python(self, path: Path, spec: JobSpec, warn: Warn) -> None:
        """The spec's ``python`` asked for its version on this machine, where sbatch runs (the nodes share its
        software as a rule); refused below slurmgen's floor before anything is submitted."""
        from slurmgen.python_check import before_queue, probe
        from slurmgen.slurm.client import run_command

        before_queue(probe(spec.python, run_command), str(path), "on this machine", bool(spec.setup), warn)

    def dry_run(self, request: Request, warn: Warn) -> DryRun:
        """The script (secrets masked) and the files it would write and the sbatch line(s), one per array for a
        sweep (split at the cluster's MaxArraySize, or Slurm's default when it cannot be read)."""
        from slurmgen.script.directives import sq
        from slurmgen.spec.secrets import mask, missing
        from slurmgen.submission.plan import dry_run_lines

        p = self.plan(request, warn)
        if (absent := missing(p.spec.env, os.environ)) is not None:
            raise UsageError(f"{p.source}: {absent} (the submit would be refused)")  # as send_plan refuses it
        script = mask(p.script, p.spec.env, sq)  # what a terminal or a CI log shows: no token
        if p.spec.sweep is None:
            return DryRun(script, tuple(dry_run_lines(p)))
        from slurmgen.submission.sweep_plan import dry_run_lines as sweep_lines
        from slurmgen.submission.sweep_plan import sweep_plan

        sp = sweep_plan(p, dry_run_max_array_size(self.client, warn))
        return DryRun(script, (*dry_run_lines(p)[:2], *sweep_lines(sp)))  # the files; then an sbatch line per array

    def would_run(self, request: Request, warn: Warn) -> str:
        from slurmgen.backends.slurm_here.sbatch import would_run

        p = self.plan(request, warn)
        self.say_partition_time(p, warn)
        result = would_run(p, self.client)
        start = result.start.isoformat(sep=" ") if result.start else "an unknown time"
        return (f"job {p.spec.name} can run: it would start at {start} on {result.nodes} "
                f"(partition {result.partition}, {result.processors} processors)")  # fmt: skip

    def launch(self, request: Request, warn: Warn) -> Submitted:
        """Settle earlier submissions whose sbatch timed out, then one sbatch (one per array for a sweep). Costs
        one squeue (only when the journal holds an unresolved submission) and one sbatch; a timed-out sbatch adds up
        to three squeue lookups by the submission's token, never a second sbatch."""
        p = self.plan(request, warn)
        self.say_partition_time(p, warn)
        return self.send_plan(p, warn)

    def say_partition_time(self, p: Plan, warn: Warn) -> None:
        from slurmgen.submission.site_checks import say_partition_time

        say_partition_time(p.spec, self.client, warn)

    def send_plan(self, p: Plan, warn: Warn) -> Submitted:
        """Carry out a plan: one job, or a sweep's arrays."""
        from slurmgen.backends.slurm_here.sbatch import send_job, send_sweep_here
        from slurmgen.journal import Journal
        from slurmgen.submission.recovery import settle_unresolved

        journal = Journal(self.base)
        for note in settle_unresolved(journal, self.client):
            warn(note)
        if p.spec.sweep is None:
            done = send_job(p, self.client, journal)
            if done.recovered:
                warn(f"note: sbatch timed out, but the job reached Slurm: found job {done.job_id} by its token "
                     f"{p.token}")  # fmt: skip
            for problem in done.problems:
                warn(f"warning: {problem}")
            for other in done.others:
                warn(f"warning: job {other} carries the same submission token; check it with `slurmgen status "
                     f"{other}`")  # fmt: skip
            from slurmgen.slurm.ids import cluster_label

            # On a multi-cluster site the job is `cluster:id` (slurmgen.slurm.ids): every later command names it.
            label = cluster_label(done.cluster, done.job_id)
            cluster = f" on cluster {done.cluster}" if done.cluster else ""
            return Submitted(label, f"submitted job {label}{cluster}; run dir {p.run_dir}; logs in "
                             f"{p.log_dir}")  # fmt: skip
        from slurmgen.submission.sweep_plan import sweep_plan
        from slurmgen.submission.sweep_submit import max_array_size

        sp = sweep_plan(p, max_array_size(self.client))
        swept = send_sweep_here(sp, self.client, journal)
        for problem in swept.problems:
            warn(f"warning: {problem}")
        points = sum(len(a.task_ids) for a in sp.arrays)
        return Submitted(swept.sweep_id, f"submitted sweep {swept.sweep_id}: {points} points as array job(s) "
                         f"{', '.join(swept.jobs)}; run dir {p.run_dir}; follow it with: slurmgen status "
                         f"{swept.sweep_id}")  # fmt: skip

    def follow(self, label: str, progress: Callable[[str], None]) -> Followed:
        """Poll the job (one scontrol each, backing off) until it ended; the rank that failed first from its run
        history when it failed."""
        from slurmgen.journal import Journal, find, find_home
        from slurmgen.queries.history import last_failing
        from slurmgen.queries.wait import describe, follow
        from slurmgen.slurm.ids import parse_cluster_job
        from slurmgen.submission.targets import Target

        cluster, job = parse_cluster_job(label)
        target = Target(job, find(Journal(find_home()).jobs(), str(job), cluster), named=cluster)  # just submitted
        client = self.client.on_cluster(target.cluster)
        result = follow(client, target.job, lambda infos: progress(describe(infos)))
        failing = last_failing(target, client.show_jobs(target.job)) if result.exit_code else None
        return Followed(result.job or label, result.state, result.exit_code, result.message, failing)

    def site_client(self) -> SlurmClient:
        return self.client

    def job(self, label: str) -> JobHandle:
        """A job id (`123`, `123_4`) or a sweep id, as `launch` printed it; the journal gives its logs and script."""
        from slurmgen.backends.slurm_here.job import SlurmJob
        from slurmgen.backends.slurm_here.sweep import SlurmSweep
        from slurmgen.journal import Journal, find
        from slurmgen.slurm.ids import parse_cluster_job
        from slurmgen.submission.sweep_record import is_sweep, load_record
        from slurmgen.submission.targets import Target

        jobs = Journal(self.base).jobs()
        if any(is_sweep(e) and e.extra.get("sweep") == label.strip() for e in jobs):
            return SlurmSweep(load_record(label.strip(), jobs), self.client)
        cluster, job = parse_cluster_job(label)
        return SlurmJob(Target(job, find(jobs, str(job), cluster), named=cluster), self.client)


def dry_run_max_array_size(client: SlurmClient, warn: Warn) -> int:
    """The cluster's MaxArraySize for a dry run: Slurm's default (and a note) when it cannot be read."""
    from slurmgen.errors import SchedulerError, SchedulerMissing
    from slurmgen.submission.sweep_plan import DEFAULT_MAX_ARRAY_SIZE
    from slurmgen.submission.sweep_submit import max_array_size

    try:
        return max_array_size(client)
    except (SchedulerError, SchedulerMissing) as exc:
        warn(f"note: cannot read MaxArraySize ({exc}); the dry run assumes Slurm's default {DEFAULT_MAX_ARRAY_SIZE}")
        return DEFAULT_MAX_ARRAY_SIZE
