"""The submission plan: where a run lives and the exact sbatch argv. Pure; slurmgen.backends.slurm_here.sbatch carries
it out and `submit --dry-run` prints it, so a dry run is the real thing minus the side effects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.journal import TOKEN_PREFIX

if TYPE_CHECKING:
    from slurmgen.spec.model import JobSpec

SCRIPT_NAME = "job.sbatch"
SPEC_COPY = "spec.yaml"
RESOLVED = "spec.resolved.json"


@dataclass(frozen=True)
class Plan:
    spec: JobSpec
    source: Path  # the spec file as given
    overrides: tuple[str, ...]
    script: str
    token: str  # unique per submission; ends the job's --comment, so a lost sbatch reply can be recovered
    run_dir: Path
    submit_dir: Path  # the directory sbatch runs in
    workdir: Path  # where the job starts: spec.chdir (relative to submit_dir), else submit_dir
    log_dir: Path  # the batch log's directory; must exist before sbatch runs
    state_dir: Path | None  # preemption.state_dir when preemption is on
    sbatch_args: tuple[str, ...]  # options on sbatch's command line (they beat the script's #SBATCH lines)
    spec_text: bytes | None = None  # the bytes validated, kept as spec.yaml; None: copy the file (read again)
    error_dir: Path | None = None  # the spec's error: the batch stderr's directory, which must exist before sbatch
    args: tuple[str, ...] = ()  # given after `--`: already the last words of spec.command; kept to be shown

    @property
    def script_path(self) -> Path:
        return self.run_dir / SCRIPT_NAME

    def sbatch_argv(self) -> list[str]:
        """Exactly what SlurmClient.sbatch runs for this plan."""
        from slurmgen.slurm.client import SlurmClient

        return SlurmClient.sbatch_argv(self.script_path, self.sbatch_args)


def comment_for(spec: JobSpec, token: str) -> str:
    """The job's --comment: the user's own words first, then our token as the last word.

    The command line beats the script's `#SBATCH --comment`, so the user's comment must be carried over here.
    """
    comment = dict(spec.sbatch).get("comment")
    return f"{comment} {TOKEN_PREFIX}{token}" if comment else f"{TOKEN_PREFIX}{token}"


def plan(
    source: Path,
    spec: JobSpec,
    script: str,
    base: Path,
    cwd: Path,
    token: str,
    overrides: tuple[str, ...] = (),
    spec_text: bytes | None = None,
    args: tuple[str, ...] = (),
) -> Plan:
    """Where the run lives and what sbatch gets. ``base`` is the journal's directory, ``cwd`` where sbatch runs."""
    workdir = cwd / spec.chdir if spec.chdir else cwd
    pre = spec.preemption
    return Plan(
        spec=spec,
        source=source,
        overrides=overrides,
        script=script,
        token=token,
        run_dir=base / "runs" / spec.name / token,
        submit_dir=cwd,
        workdir=workdir,
        log_dir=workdir / spec.output,
        state_dir=workdir / pre.state_dir if pre.enabled else None,
        sbatch_args=(f"--comment={comment_for(spec, token)}",),
        spec_text=spec_text,
        error_dir=workdir / spec.error if spec.error else None,
        args=args,
    )


def dry_run_lines(p: Plan) -> list[str]:
    """What submit would do, for `--dry-run` (the script itself goes to stdout)."""
    import shlex

    error = f", {p.error_dir} (error)" if p.error_dir is not None else ""
    state = f" and {p.state_dir} (preemption.state_dir)" if p.state_dir is not None else ""
    return [
        f"would write {p.script_path} (the script above), {p.run_dir / SPEC_COPY} and {p.run_dir / RESOLVED}",
        f"would create {p.log_dir} (output){error}{state}",
        f"would run: {shlex.join(p.sbatch_argv())}",
        f"the job would start in {p.workdir}",
    ]
