"""On the real path: a secret forwarded with `env: {X: {from_env: X}}` reaches the task through
Slurm's own environment handling (sbatch(1) --export) and is written nowhere. `slurmgen submit` runs as a real
process with the value only in its environment; the program writes sha256(value), never the value; then the value
is grepped in every file the job wrote (run dir and script copy, logs, state, journal: all under the directory
submitted from), in everything slurmgen printed, and in what `scontrol` shows of the job."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import run_slurmgen

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

SECRET = "hf_" + "Qx7" * 12  # a Hugging Face token's shape; only this test knows it
LONG = 300.0  # seconds: the cluster is shared, so a job may pend a while


def spec_text(seen: Path) -> str:
    program = (
        "import hashlib, os, pathlib; "
        f"pathlib.Path({str(seen)!r}).write_text(hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())"
    )
    return (
        f"name: sgsecret\ncommand: {json.dumps([sys.executable, '-c', program])}\ntime: '00:05:00'\nnodes: 1\n"
        f"tasks_per_node: 1\npython: {sys.executable}\noutput: logs\npreemption: true\n"
        "env:\n  HF_TOKEN: {from_env: HF_TOKEN}\n"
    )


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and needle in p.read_bytes()]


def test_a_forwarded_secret_reaches_the_task_through_sbatch_and_is_written_nowhere(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.sha256"
    (tmp_path / "s.yaml").write_text(spec_text(seen))
    # Input variables beat #SBATCH lines (sbatch(1) "INPUT ENVIRONMENT VARIABLES"): an SBATCH_EXPORT=NONE or an
    # inherited SLURM_EXPORT_ENV=NONE would keep the value from the job, were they passed on to sbatch.
    env = {**slurm_cluster.env, "HF_TOKEN": SECRET, "SBATCH_EXPORT": "NONE", "SLURM_EXPORT_ENV": "NONE"}
    printed = ""

    def slurmgen(*args: str) -> str:
        nonlocal printed
        done = run_slurmgen(*args, cwd=tmp_path, env=env, timeout=LONG)
        printed += done.stdout + done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    job = slurmgen("submit", "s.yaml", "--wait").splitlines()[0]
    assert job.isdigit()
    assert seen.read_text() == hashlib.sha256(SECRET.encode()).hexdigest()  # the task saw the value
    for args in (("status", "s.yaml"), ("logs", job), ("history", job), ("render", "s.yaml")):
        slurmgen(*args)
    assert SECRET not in printed, printed

    journal = [json.loads(line) for line in (tmp_path / ".slurmgen" / "journal.jsonl").read_text().splitlines()]
    run_dir = Path(journal[-1]["run_dir"])
    script = (run_dir / "job.sbatch").read_text()
    assert "#SBATCH --export='ALL,HF_TOKEN'" in script and "HF_TOKEN" in script
    # Every place the job and slurmgen wrote is under the directory it was submitted from.
    for place in (run_dir, tmp_path / ".slurmgen", tmp_path / "logs" / f"sgsecret-{job}", tmp_path / "logs" / "state"):
        assert place.is_dir() and place.is_relative_to(tmp_path), place
    assert files_containing(tmp_path, SECRET.encode()) == []

    # scontrol prints no environment, in any detail, nor does the stored batch script carry the value.
    for argv in (["scontrol", "show", "job", job], ["scontrol", "-dd", "show", "job", job],
                 ["scontrol", "write", "batch_script", job, "-"]):  # fmt: skip
        shown = slurm_cluster.run(argv, timeout=30)
        assert shown.returncode == 0 and SECRET not in shown.stdout + shown.stderr, (argv, shown.stderr)
