"""`slurmgen.submit(spec, overrides)`: validate, render, plan and submit a spec, as `slurmgen submit` does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmgen.backends.interface import Request
from slurmgen.errors import Problem, SpecError, UsageError
from slurmgen.submission.source import SpecSource, Warn

if TYPE_CHECKING:
    from slurmgen.api.job import Job
    from slurmgen.spec.model import JobSpec


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
    if spec.srun:  # left out when empty, as to_dict leaves it (the digest of a spec without it is unchanged)
        data["srun"] = {key: True if value is None else value for key, value in spec.srun}
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


def request_for(
    spec: str | Path | JobSpec | Mapping[str, Any],
    overrides: Mapping[str, object] | None,
    cluster: str | None,
    one: str | None = None,
    many: str | None = None,
    args: Sequence[str] = (),
) -> Request:
    """The submission of `slurmgen.submit` and `slurmgen.submit_sweep`: the spec (see spec_source) under the cluster
    profile ``cluster`` names (clusters.yaml), as `--cluster` does, with ``args`` after its command."""
    if isinstance(args, str):
        raise UsageError(
            f"args: a list of words, not the text {args!r}: write args=[{', '.join(map(repr, args.split()))}]"
        )
    source = spec_source(spec, overrides)
    profile = None
    if cluster is not None:
        from slurmgen.spec.profile import find_profile

        profile = find_profile(cluster, source.path.parent)
    return Request(SpecSource(source.path, source.overrides, profile, tuple(args)), one=one, many=many)


def _ignore(line: str) -> None:
    del line


def submit(
    spec: str | Path | JobSpec | Mapping[str, Any],
    overrides: Mapping[str, object] | None = None,
    *,
    warn: Warn | None = None,
    cluster: str | None = None,
    check: bool = True,
    args: Sequence[str] = (),
) -> Job:
    """Validate, render and submit a spec (a file path, a loaded JobSpec, or a mapping of its fields, as
    `yaml.safe_load` gives them); the submitted job's handle.

    ``overrides`` maps dotted field paths to values, like `--set` (`{"nodes": 4}`). Warnings (the spec's and
    the script doctor's) go to ``warn`` (default: dropped; pass `print` to see them). A bad spec raises
    SpecError, whose `str()` is the line the CLI prints; Slurm refusing raises SchedulerError, no Slurm client
    SchedulerMissing. Costs one sbatch (plus one squeue when an earlier sbatch timed out).

    ``cluster`` names a cluster profile (clusters.yaml), as `--cluster` does: its defaults go under the spec, and
    with a `host` the job is submitted over ssh with a snapshot of the project around the current directory.

    ``check``: the spec's ``python`` is asked for its version first (on the login node for a remote cluster), and a
    Python below slurmgen's floor raises PythonRefused before anything is submitted; ``check=False`` is
    `--no-check`.

    ``args`` go after the spec's command, as `slurmgen submit SPEC -- ARGS` does (each one word, never split;
    `${NAME}` expands as in the spec); the job's run directory and journal entry keep them."""
    from slurmgen.api.job import Job
    from slurmgen.backends.registry import backend_for

    request = request_for(spec, overrides, cluster, args=args)
    path = request.source.path
    if cluster is None:
        where = f"slurmgen.submit_sweep (a Sweep handle) or `slurmgen submit {path}`"
    else:
        where = f"slurmgen.submit_sweep(..., cluster={cluster!r}) or `slurmgen submit {path} --cluster {cluster}`"
    refusal = f"{path}: sweep: a sweep is many jobs; submit it with {where}"
    request = Request(request.source, one=refusal, check=check)
    done = backend_for(request.source.profile).launch(request, warn or _ignore)
    return Job(done.label)
