"""On the real test cluster: a spec whose python is 3.8 is refused by `submit` and by `slurmgen.submit` before
sbatch runs (no job of its name appears in the queue), `--no-check` submits it, and `doctor SPEC`
says FAILED for it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import slurmgen_argv
from runtime.test_runtime_import import find_python

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def jobs_named(cluster: SlurmCluster, name: str) -> list[str]:
    done = cluster.run(["squeue", "--noheader", "--states=all", f"--name={name}", "--format=%i"], check=True)
    return done.stdout.split()


def test_an_old_python_never_reaches_the_queue(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    python = find_python("3.8")
    if python is None:
        pytest.skip("no working python3.8 here (pyenv install 3.8)")
    name = f"pyold-{uuid.uuid4().hex[:8]}"
    (tmp_path / "job.yaml").write_text(f'name: {name}\ncommand: ["true"]\ntime: "20:00"\npython: {python}\n')
    env = {**slurm_cluster.env, "SLURMGEN_HOME": str(tmp_path / "journal")}
    refused = slurm_cluster.run(slurmgen_argv("submit", "job.yaml"), cwd=tmp_path, env=env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "is Python 3.8" in refused.stderr and "--no-check submits anyway" in refused.stderr
    api = subprocess.run(
        [sys.executable, "-c", "import slurmgen\ntry:\n slurmgen.submit('job.yaml')\nexcept Exception as e:\n"
         " print(type(e).__name__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert api.stdout.strip() == "PythonRefused", api.stderr
    assert jobs_named(slurm_cluster, name) == []  # sbatch never ran

    doctor = slurm_cluster.run(slurmgen_argv("doctor", "job.yaml"), cwd=tmp_path, env=env)
    assert doctor.returncode == 1 and f"  python       FAILED: python: {python} is Python 3.8" in doctor.stdout

    through = slurm_cluster.run(slurmgen_argv("submit", "--no-check", "job.yaml"), cwd=tmp_path, env=env)
    assert through.returncode == 0, through.stderr
    job = through.stdout.strip()
    try:
        assert jobs_named(slurm_cluster, name) == [job]
    finally:
        slurm_cluster.run(["scancel", job])
