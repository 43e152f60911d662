"""SLURMGEN_RUN_ID under `slurmgen run --local`: one per job, kept by `slurmgen resume`'s new job
(SLURMGEN_RESUME_FROM), never taken from an older job with the same id or from the job that submitted this one;
exported as WANDB_RUN_ID unless the user set their own. (The same id across a requeue: test_trackers_local.py.)"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

pytestmark = pytest.mark.slow

NAMES = ("SLURMGEN_RUN_ID", "WANDB_RUN_ID", "WANDB_RESUME")
PRINT = f"import os; print('ids', *(os.environ.get(n, '-') for n in {NAMES!r}))"


def run(cwd: Path, **env: str) -> tuple[str, dict[str, str]]:
    """One local job printing the identity variables: its id and what the task saw."""
    base = {k: v for k, v in os.environ.items() if k not in NAMES and k != "SLURMGEN_RESUME_FROM"}
    result = run_slurmgen("run", "--local", "job.yaml", cwd=cwd, env={**base, **env})
    assert result.returncode == 0, result.stderr[-3000:]
    job = re.findall(r"local-(\d+):", result.stderr)[0]
    seen = re.findall(r"^ids (.*)$", (cwd / "logs" / f"idj-{job}" / "rank-0.log").read_text(), re.M)
    assert len(seen) == 1
    return job, dict(zip(NAMES, seen[0].split(), strict=True))


def test_one_identity_per_job_and_resume_keeps_it(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        f"name: idj\ncommand: [{sys.executable}, -c, \"{PRINT}\"]\ntime: '00:05:00'\npython: {sys.executable}\n"
        "output: logs\n"
    )
    job, first = run(tmp_path)
    identity = first["SLURMGEN_RUN_ID"]
    assert re.fullmatch(rf"{job}-[0-9a-f]{{8}}", identity)
    assert first == {"SLURMGEN_RUN_ID": identity, "WANDB_RUN_ID": identity, "WANDB_RESUME": "allow"}
    assert (tmp_path / "logs" / f"idj-{job}" / "run-id").read_text() == identity + "\n"
    # Another job (a local job may even get the same id, and find the first one's log directory): a new identity.
    _, second = run(tmp_path)
    assert second["SLURMGEN_RUN_ID"] not in ("-", identity)
    # `slurmgen resume` of a job Slurm forgot submits its script again with SLURMGEN_RESUME_FROM=<its key>.
    _, resumed = run(tmp_path, SLURMGEN_RESUME_FROM=job)
    assert resumed["SLURMGEN_RUN_ID"] == identity == resumed["WANDB_RUN_ID"]
    # Submitted from inside the first job: its variables are inherited, and are not this job's.
    _, child = run(tmp_path, SLURMGEN_RUN_ID=identity, WANDB_RUN_ID=identity, WANDB_RESUME="allow")
    assert child["SLURMGEN_RUN_ID"] not in (identity, "-") and child["WANDB_RUN_ID"] == child["SLURMGEN_RUN_ID"]
    # The user's own W&B run id wins.
    _, own = run(tmp_path, WANDB_RUN_ID="mine", WANDB_RESUME="must")
    assert (own["WANDB_RUN_ID"], own["WANDB_RESUME"]) == ("mine", "must")
