"""`slurmgen.submit(spec, overrides)`: validate, render, plan and submit a spec, as `slurmgen submit` does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.api.compiling import SpecSource, Warn, compiled
from slurmgen.errors import Problem, SpecError, UsageError

if TYPE_CHECKING:
    from slurmgen.api.job import Job
    from slurmgen.backends.slurm_here.sbatch import Submission
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec
    from slurmgen.submission.plan import Plan
    from slurmgen.submission.sweep_submit import SweepSubmission


def override_args(overrides: Mapping[str, object] | None) -> tuple[str, ...]:
    """A dict of dotted paths, as `--set` takes them: {"nodes": 4, "env.MODE": "fast"} -> ("nodes=4", ...).

    Values are written as JSON, which YAML reads back as the same value, so the string "4" stays a string."""
    if not overrides:
        return ()
    return tuple(f"{key}={json.dumps(value)}" for key, value in overrides.items())


def spec_mapping(spec: JobSpec) -> dict[str, Any]:
    """A loaded spec as the fields a spec file would hold: loading it again gives the same spec (and digest)."""
    data = spec.to_dict()
    del data["time_seconds"]  # derived from time
    if spec.launcher == "srun":
        del data["nproc_per_node"]  # derived: tasks_per_node
    data["env"] = dict(spec.env)
    data["sbatch"] = {key: True if value is None else value for key, value in spec.sbatch}
    if not spec.preemption.enabled:
        data["preemption"] = False  # its other fields are resolved for "off" and refused as given values
    if not spec.recovery.enabled:
        data["recovery"] = False  # as for preemption: its other fields are resolved for "off"
    elif not spec.recovery.health_check:
        del data["recovery"]["health_check"]  # none: the field left out (an empty list is refused)
    if spec.sweep is not None:  # the expanded points, as an explicit list: the same points in the same order
        sweep = spec.sweep
        data["sweep"] = {"points": [sweep.values(i) for i in range(len(sweep.points))]}
        if sweep.max_parallel is not None:
            data["sweep"]["max_parallel"] = sweep.max_parallel
    cleaned: dict[str, Any] = _without_none(data)
    return cleaned


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def spec_source(spec: str | Path | JobSpec | Mapping[str, Any], overrides: Mapping[str, object] | None) -> SpecSource:
    """The file to submit: a path as given. A loaded spec (a JobSpec, or the fields of a spec as a mapping) is
    checked, then written to `<journal dir>/specs/<name>.yaml` (JSON, which YAML reads), so that the run directory
    keeps a copy and `slurmgen resume` can submit it again; a bad one raises SpecError naming `<spec>` and writes
    nothing."""
    from slurmgen.spec.model import JobSpec

    args = override_args(overrides)
    if isinstance(spec, (str, Path)):
        return SpecSource(Path(spec), args)
    if isinstance(spec, JobSpec):
        data = spec_mapping(spec)
    elif isinstance(spec, Mapping):
        data = dict(spec)
    else:
        raise UsageError(f"submit: a spec is a file path, a JobSpec or a mapping of fields, not {type(spec).__name__}")
    from slurmgen.atomic import write_text
    from slurmgen.journal import home
    from slurmgen.spec.load import load_text

    try:
        text = json.dumps(data, indent=2) + "\n"
    except (TypeError, ValueError) as exc:
        raise SpecError([Problem("<spec>", "", f"cannot be written as a spec file: {exc}")]) from None
    try:
        name = load_text(text, "<spec>", list(args)).spec.name
    except SpecError as exc:  # the line numbers are those of the text written here, not the caller's: dropped
        inline = [Problem("<spec>", p.path, p.message) if p.source.startswith("<spec>") else p for p in exc.problems]
        raise SpecError(inline) from None
    path = home() / "specs" / f"{name}.yaml"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_text(path, text)
    except OSError as exc:
        reason = exc.strerror or exc
        raise UsageError(f"cannot write {path} ({reason}); set SLURMGEN_HOME to a writable directory") from None
    return SpecSource(path, args)


def load_and_render(source: SpecSource, templates: Path | None, warn: Warn) -> tuple[JobSpec, str]:
    """The spec and its script (see compiled)."""
    built = compiled(source, templates, warn)
    return built.spec, built.script


def planned(source: SpecSource, templates: Path | None, base: Path, warn: Warn) -> Plan:
    """Validate and render (warnings to ``warn``), then plan a submission recorded under ``base``; the plan keeps
    the exact bytes that were validated (the spec file is read once)."""
    from slurmgen.journal import new_token
    from slurmgen.submission.plan import plan

    built = compiled(source, templates, warn)
    return plan(source.path, built.spec, built.script, base, Path.cwd(), new_token(), source.overrides, built.text)


def submit_source(source: SpecSource, templates: Path | None, warn: Warn) -> tuple[Plan, Submission]:
    """Carry out the plan: settle earlier submissions whose sbatch timed out, then sbatch once. Costs one squeue
    (only when the journal holds an unresolved submission) and one sbatch; a timed-out sbatch adds up to three
    squeue lookups by the submission's token, never a second sbatch."""
    from slurmgen.journal import home

    base = home()
    p = planned(source, templates, base, warn)
    refusal = (f"{source.path}: sweep: a sweep is many jobs; submit it with slurmgen.submit_sweep (a Sweep handle) "
               f"or `slurmgen submit {source.path}`")  # fmt: skip
    done = submit_any(p, base, warn, single=refusal)
    assert done.job is not None  # a sweep was refused
    return p, done.job


@dataclass(frozen=True)
class Submitted:
    """What a submission gave: the id status/logs/cancel take (a job id, or a sweep's id), the line that says so,
    and the job's submission (None for a sweep)."""

    label: str
    message: str
    job: Submission | None


def submit_any(p: Plan, base: Path, warn: Warn, *, single: str | None = None) -> Submitted:
    """Submit a planned spec: one job, or a sweep's arrays. The one place where a submission is told a sweep from
    a single job; ``single`` refuses a sweep with that line (a caller that follows one job, as `submit --wait`,
    or returns one, as slurmgen.submit, cannot take many)."""
    if p.spec.sweep is None:
        done = submit_plan(p, base, warn)
        cluster = f" on cluster {done.cluster}" if done.cluster else ""
        message = f"submitted job {done.job_id}{cluster}; run dir {p.run_dir}; logs in {p.log_dir}"
        return Submitted(str(done.job_id), message, done)
    if single is not None:
        raise UsageError(single)
    from slurmgen.slurm.client import SlurmClient

    swept, points = submit_planned(p, base, SlurmClient(), warn)
    message = (f"submitted sweep {swept.sweep_id}: {points} points as array job(s) {', '.join(map(str, swept.jobs))}; "
               f"run dir {p.run_dir}; follow it with: slurmgen status {swept.sweep_id}")  # fmt: skip
    return Submitted(swept.sweep_id, message, None)


def dry_run_report(p: Plan, warn: Warn) -> list[str]:
    """What `submit --dry-run` says on stderr after the script: the files it would write and the sbatch line(s),
    one per array for a sweep (split at the cluster's MaxArraySize, or Slurm's default when it cannot be read)."""
    from slurmgen.submission.plan import dry_run_lines

    if p.spec.sweep is None:
        return dry_run_lines(p)
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.submission.sweep_plan import dry_run_lines as sweep_lines
    from slurmgen.submission.sweep_plan import sweep_plan

    sp = sweep_plan(p, dry_run_max_array_size(SlurmClient(), warn))
    return [*dry_run_lines(p)[:2], *sweep_lines(sp)]  # the files it would write; then one sbatch line per array


def submit_plan(p: Plan, base: Path, warn: Warn) -> Submission:
    """sbatch one planned job (not a sweep), after settling earlier submissions whose sbatch timed out."""
    from slurmgen.backends.slurm_here import sbatch as submitting
    from slurmgen.journal import Journal
    from slurmgen.slurm.client import SlurmClient

    client, journal = SlurmClient(), Journal(base)
    for note in submitting.settle_unresolved(journal, client):
        warn(note)
    done = submitting.submit(p, client, journal)
    if done.recovered:
        warn(f"note: sbatch timed out, but the job reached Slurm: found job {done.job_id} by its token {p.token}")
    for problem in done.problems:
        warn(f"warning: {problem}")
    for other in done.others:
        warn(f"warning: job {other} carries the same submission token; check it with `slurmgen status {other}`")
    return done


def _ignore(line: str) -> None:
    del line


def submit(
    spec: str | Path | JobSpec | Mapping[str, Any],
    overrides: Mapping[str, object] | None = None,
    *,
    warn: Warn | None = None,
    cluster: str | None = None,
) -> Job:
    """Validate, render and submit a spec (a file path, a loaded JobSpec, or a mapping of its fields, as
    `yaml.safe_load` gives them); the submitted job's handle.

    ``overrides`` maps dotted field paths to values, like `--set` (`{"nodes": 4}`). Warnings (the spec's and
    the script doctor's) go to ``warn`` (default: dropped; pass `print` to see them). A bad spec raises
    SpecError, whose `str()` is the line the CLI prints; Slurm refusing raises SchedulerError, no Slurm client
    SchedulerMissing. Costs one sbatch (plus one squeue when an earlier sbatch timed out).

    ``cluster`` names a cluster profile (clusters.yaml), as `--cluster` does: its defaults go under the spec, and
    with a `host` the job is submitted over ssh with a snapshot of the project around the current directory."""
    from slurmgen.api.job import Job
    from slurmgen.slurm.ids import as_job_id

    source = spec_source(spec, overrides)
    if cluster is not None:
        from slurmgen.spec.profile import find_profile

        source = SpecSource(source.path, source.overrides, find_profile(cluster, source.path.parent))
        if source.profile is not None and source.profile.host is not None:
            refusal = (f"{source.path}: sweep: a sweep is many jobs; submit it with slurmgen.submit_sweep(..., "
                       f"cluster={cluster!r}) or `slurmgen submit {source.path} --cluster {cluster}`")  # fmt: skip
            remote = submit_remote_source(source, None, warn or _ignore, snapshot=True, single=refusal)
            return Job(as_job_id(remote.label))
    _, done = submit_source(source, None, warn or _ignore)
    return Job(as_job_id(done.job_id))


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


def submit_planned(p: Plan, base: Path, client: SlurmClient, warn: Warn) -> tuple[SweepSubmission, int]:
    """sbatch every array of a planned sweep (one sbatch per array, split at the cluster's MaxArraySize); the
    submission and its number of points. One `scontrol show config` and one sbatch per array."""
    from slurmgen.backends.slurm_here import sbatch as submitting
    from slurmgen.journal import Journal
    from slurmgen.submission.sweep_plan import sweep_plan
    from slurmgen.submission.sweep_submit import max_array_size, submit_sweep

    journal = Journal(base)
    for note in submitting.settle_unresolved(journal, client):
        warn(note)
    sp = sweep_plan(p, max_array_size(client))
    done = submit_sweep(sp, client, journal)
    for problem in done.problems:
        warn(f"warning: {problem}")
    return done, sum(len(a.task_ids) for a in sp.arrays)


def submit_remote_source(
    source: SpecSource,
    templates: Path | None,
    warn: Warn,
    *,
    snapshot: bool,
    code_dir: str | None = None,
    single: str | None = None,
    many: str | None = None,
) -> Submitted:
    """Submit to the cluster of ``source.profile`` over ssh (slurmgen.backends.slurm_ssh.placing): the snapshot of the
    project around the current directory (or, without one, the job starts in ``code_dir`` on the cluster). One job,
    or a sweep's arrays; ``single`` refuses a sweep with that line, ``many`` a single job, before anything is sent
    (see submit_any)."""
    from slurmgen.backends.slurm_ssh.placing import submit_remote
    from slurmgen.journal import Journal, home, new_token
    from slurmgen.remote.transport import transport_for
    from slurmgen.script.build import build_file

    profile = source.profile
    if profile is None or profile.host is None:
        raise UsageError("a remote submission needs a cluster profile with a host")
    if not snapshot and code_dir is None:
        raise UsageError("--no-snapshot: say where the code is on the cluster with --set chdir=/path/on/the/cluster")

    def compile_spec(extra: list[str]) -> tuple[JobSpec, str]:
        """The spec alone first (its output, chdir and setup place the run; no render), then with the run's
        placement the script: the spec's warnings are said once."""
        from slurmgen.script.build import check_file

        if not extra:
            checked = check_file(source.path, list(source.overrides), Path.cwd(), profile)
            if single is not None and checked.spec.sweep is not None:
                raise UsageError(single)
            if many is not None and checked.spec.sweep is None:
                raise UsageError(many)
            said.update(str(p) for p in checked.warnings)
            for problem in checked.warnings:
                warn(f"warning: {problem}")
            return checked.spec, ""
        built = build_file(source.path, [*source.overrides, *extra], templates, Path.cwd(), profile)
        for problem in built.warnings:  # the script doctor's, on the script that is submitted
            if str(problem) not in said:
                warn(f"warning: {problem}")
        return built.spec, built.script

    said: set[str] = set()

    import time

    done = submit_remote(
        compile_spec,
        profile,
        transport_for(profile.name, profile.host, profile.control_persist),
        project=Path.cwd() if snapshot else None,
        code_dir=code_dir,
        token=new_token(),
        journal=Journal(home()),
        spec_path=source.path.resolve(),
        clock=time.time,
        warn=warn,
        overrides=source.overrides,
    )
    sent = "" if done.upload is None else f" ({done.upload.files_sent} files, {done.upload.bytes_sent} bytes sent)"
    code = f"snapshot {done.snapshot[:12]}{' dirty' if done.dirty else ''}{sent}" if done.snapshot else done.code_dir
    if done.arrays:
        message = (f"submitted sweep {done.job_id} on cluster {done.cluster} as array job(s) {', '.join(done.arrays)}; "
                   f"code {code}; logs in {done.log_dir}; follow it with: slurmgen status {done.job_id}")  # fmt: skip
    else:
        message = f"submitted job {done.job_id} on cluster {done.cluster}; code {code}; logs in {done.log_dir}"
    return Submitted(done.job_id, message, None)
