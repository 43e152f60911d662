"""`slurmgen run` with the spec field python at the floors: the batch shell's helper and the task supervisor on
real 3.9 and 3.10 interpreters through a preemption round trip that ends with the final weights of the same job on
the suite's Python, a 3.10 program on slurmgen.runtime, and a 3.8 python refused in one line with the run's start
recorded."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from once_per_run import once_per_run
from runtime.runtime_helpers import without_steering
from runtime.test_runtime_import import find_python

from slurmgen import run_history

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent


def python_or_skip(version: str) -> str:
    found = find_python(version)
    if found is None:
        pytest.skip(f"no working python{version} here")
    return found


def run_job(cwd: Path, text: str, *args: str) -> tuple[int, str, str]:
    """The job to its end: exit code, the runner's stderr, the batch log. slurmgen reaches the old interpreters
    through PYTHONPATH (they have no slurmgen installed)."""
    (cwd / "job.yaml").write_text(text)
    env = {**without_steering(), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = run_slurmgen("run", "job.yaml", *args, cwd=cwd, env=env, timeout=300)
    logs = sorted((cwd / "logs").glob("job-*.log"))
    return done.returncode, done.stderr, logs[0].read_text() if logs else ""


def history(cwd: Path) -> list[run_history.Run]:
    (found,) = [p for p in (cwd / "logs").glob("job-*") if p.is_dir()]
    return run_history.runs(run_history.read(str(found)))


def training_job(cwd: Path, python: str) -> str:
    """jobs/train_tiny.py (torch, on the suite's interpreter) on 2 nodes x 2 tasks, with ``python`` for slurmgen's
    in-job processes. Its learning rate of 0.001 keeps every weight above 2^-10 (the smallest ends near 0.003),
    where float32's spacing (2^-33, 1.2e-10) is above the checksum's resolution (10 decimals of an exact sum in
    double): the last bit of any one weight changes the checksum."""
    (cwd / "train_tiny.py").write_text((ROOT / "jobs" / "train_tiny.py").read_text())
    command = [sys.executable, str(cwd / "train_tiny.py"), "--steps", "120", "--step-time", "0.02", "--light"]
    return (
        f"name: job\ncommand: {[*command, '--lr', '0.001']!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\n"
        f"python: {python}\npreemption: {{handler: runtime}}\n"
    )


def rank0(cwd: Path) -> str:
    (found,) = (cwd / "logs").glob("job-*/rank-0.log")
    return found.read_text()


def reference_weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final weights of the same job with the suite's Python as the spec's python, uninterrupted; made once
    for the test run (tests/once_per_run.py)."""

    def make() -> str:
        cwd = tmp_path_factory.mktemp("floors-reference")
        code, runner, batch = run_job(cwd, training_job(cwd, sys.executable))
        assert code == 0, runner + batch
        (weights,) = re.findall(r"final weights (\S+)", rank0(cwd))
        return str(weights)

    return str(once_per_run(tmp_path_factory, "local-python-floors-weights-120", make))


@pytest.mark.torch
@pytest.mark.parametrize("version", ["3.9", "3.10"])
def test_the_helper_and_supervisor_carry_a_preemption_round_trip_on(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, version: str
) -> None:
    """python: 3.9 or 3.10 runs the batch shell's helper and every task's supervisor; the program (torch) runs on
    the suite's interpreter: saved, requeued by rank 0, resumed at the saved step with the saved weights, and ends
    with the final weights of the same job run uninterrupted with the suite's Python, bit for bit."""
    text = training_job(tmp_path, python_or_skip(version))
    code, runner, batch = run_job(tmp_path, text, "--preempt-after", "0.5")
    assert code == 0, runner + batch
    assert "COMPLETED, exit code 0, 2 runs" in runner
    assert "error" not in batch.replace("slurmstepd: error: *** JOB", ""), batch
    assert [(r.cause, r.requeued_by) for r in history(tmp_path)] == [("preemption", "rank0"), (None, None)]
    out = rank0(tmp_path)
    (stop,) = re.findall(r"stopping after step (\d+), weights (\S+)", out)
    assert re.findall(r"resumed weights (\S+) at step (\d+)", out) == [(stop[1], stop[0])], out
    assert re.findall(r"final weights (\S+)", out) == [reference_weights(tmp_path_factory)], out


def test_a_3_10_program_runs_on_slurmgen_runtime(tmp_path: Path) -> None:
    py310 = python_or_skip("3.10")
    program = (
        "import sys; from slurmgen.runtime import Preemption; p = Preemption(); "
        "print('RUNTIME', *sys.version_info[:2], p.should_stop(), flush=True)"
    )
    text = (
        f"name: job\ncommand: {[py310, '-c', program]!r}\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\n"
        f"python: {py310}\n"
    )
    code, runner, batch = run_job(tmp_path, text)
    assert code == 0, runner + batch
    (rank0,) = (tmp_path / "logs").glob("job-*/rank-0.log")
    assert "RUNTIME 3 10 False" in rank0.read_text()


def test_a_3_8_python_is_refused_in_one_line_and_its_run_recorded(tmp_path: Path) -> None:
    py38 = python_or_skip("3.8")
    text = f"name: job\ncommand: ['true']\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\npython: {py38}\n"
    code, runner, batch = run_job(tmp_path, text)
    assert code == 1, runner + batch
    said = [line for line in batch.splitlines() if "Python" in line or "installed" in line or "could not" in line]
    assert said == [
        f"slurmgen: the batch shell's helper (slurmgen.batch) needs Python 3.9 or newer, and the spec field python "
        f"runs {said[0].split(' runs ')[1].split()[0]} ({py38}): set python to a Python 3.9 or newer "
        f"(python: /path/to/python3)"
    ], batch
    assert [r.run for r in history(tmp_path)] == [1]
