"""The run directory of a submission, and the log and state directories it writes to: created and proven
writable before anything reaches Slurm."""

from __future__ import annotations

import json
import os
from pathlib import Path

from slurmgen.atomic import write_bytes, write_text
from slurmgen.errors import Problem, SpecError, UsageError
from slurmgen.submission.plan import RESOLVED, SPEC_COPY, Plan


def ensure_writable(directory: Path, field: str, source: Path) -> None:
    """Create ``directory`` and prove a file can be made in it, before sbatch: Slurm does not create the log's
    directory, and a job whose log cannot be opened fails without a word (toil #4633)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".slurmgen-probe-{os.getpid()}-{os.urandom(4).hex()}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecError(
            [Problem(str(source), field, f"cannot write to {directory} ({reason}); fix it or choose another path")]
        ) from None


def _private_dirs(path: Path, base: Path) -> None:
    """mkdir -p with mode 0700 for every directory created (Path.mkdir gives parents the default mode)."""
    missing = [d for d in (path, *path.parents) if d == base or base in d.parents]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            if directory == path:
                raise
    os.chmod(path, 0o700)


def write_run_dir(p: Plan, base: Path) -> None:
    _private_dirs(p.run_dir, base)
    write_text(p.script_path, p.script)
    write_bytes(p.run_dir / SPEC_COPY, p.source.read_bytes() if p.spec_text is None else p.spec_text)
    resolved = {
        "source": str(p.source.resolve()),
        "overrides": list(p.overrides),
        "args": list(p.args),
        "digest": p.spec.digest,
        "workdir": str(p.workdir),
        "submit_dir": str(p.submit_dir),
        "log_dir": str(p.log_dir),
        "spec": p.spec.to_dict(),
    }
    write_text(p.run_dir / RESOLVED, json.dumps(resolved, indent=2, sort_keys=True) + "\n")


def ensure_dirs(p: Plan) -> None:
    """The directories the job writes into before its first line runs, created and checked: the batch log's
    (output), the batch stderr's (error) and the resume state's (preemption.state_dir)."""
    ensure_writable(p.log_dir, "output", p.source)
    if p.error_dir is not None:
        ensure_writable(p.error_dir, "error", p.source)
    if p.state_dir is not None:
        ensure_writable(p.state_dir, "preemption.state_dir", p.source)


def prepare(p: Plan, base: Path) -> None:
    """Every effect before sbatch: the job's directories (checked), then the run directory."""
    ensure_dirs(p)
    try:
        write_run_dir(p, base)
    except OSError as exc:
        raise UsageError(
            f"cannot write the run directory {p.run_dir} ({exc.strerror or exc}); submit from a writable directory "
            f"or set SLURMGEN_HOME"
        ) from None
