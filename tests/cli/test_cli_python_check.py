"""`submit` and `slurmgen.submit` here ask the spec's python for its version before sbatch: a 3.8 one is refused in
one line and sbatch is never run; `--no-check` (check=False) submits it. `doctor SPEC` shows the same verdict.
sbatch is a stand-in that records its calls (the real cluster: tests/backends/test_python_refused_cluster.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from runtime.test_runtime_import import find_python


def setup(tmp_path: Path) -> tuple[str, dict[str, str]]:
    python = find_python("3.8")
    if python is None:
        pytest.skip("no working python3.8 here (pyenv install 3.8)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/sbatch.log\necho 77\n')
    (bin_dir / "sbatch").chmod(0o755)
    (tmp_path / "job.yaml").write_text(f'name: pyc\ncommand: ["true"]\ntime: "20:00"\npython: {python}\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "SBATCH"))},
           "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURMGEN_HOME": str(tmp_path / "journal")}  # fmt: skip
    return python, env


def test_a_python_below_the_floor_is_refused_before_sbatch(tmp_path: Path) -> None:
    python, env = setup(tmp_path)
    refused = run_slurmgen("submit", "job.yaml", cwd=tmp_path, env=env)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: job.yaml: python: {python} is Python 3.8; slurmgen's batch shell helper and task supervisor need "
        "3.9 or newer: set the spec field python to a newer interpreter (asked on this machine); --no-check submits "
        "anyway\n"
    )
    assert not (tmp_path / "sbatch.log").exists() and not (tmp_path / "journal").exists()  # nothing half-written
    through = run_slurmgen("submit", "--no-check", "job.yaml", cwd=tmp_path, env=env)
    assert (through.returncode, through.stdout) == (0, "77\n"), through.stderr
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1


def test_the_api_refuses_it_and_check_false_submits(tmp_path: Path) -> None:
    _, env = setup(tmp_path)
    code = (
        "import slurmgen\nfrom slurmgen.python_check import PythonRefused\n"
        "try:\n    slurmgen.submit('job.yaml')\nexcept PythonRefused as e:\n    print('refused', e)\n"
        "print(slurmgen.submit('job.yaml', check=False).id)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("refused job.yaml: python: ") and "is Python 3.8" in first and second == "77"
    assert len((tmp_path / "sbatch.log").read_text().splitlines()) == 1
