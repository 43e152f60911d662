"""The in-job Pythons at their floors on the real cluster: the spec's ``python`` is a real 3.9 and then a real 3.10
(pyenv's), so the batch shell's helper and every task's supervisor run on it, while the training program
(jobs/train_tiny.py, torch) runs on the suite's interpreter. A preemption round trip (`scancel --batch
--signal=USR1`: the batch shell forwards it, rank 0 saves and requeues, the next run resumes) ends with exactly the
final weights of the same job run with the suite's own Python throughout.

The old interpreters have no slurmgen installed: they reach it through PYTHONPATH naming the repository root,
given to sbatch here, which exports the submitting environment into the job (sbatch(1), --export's default ALL).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import SlurmCluster
from once_per_run import once_per_run

from slurmgen.script.render import render
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.ids import JobState
from slurmgen.spec.load import load_text

from .cluster_jobs import PY, ROOT, TRAIN, check_resume, job_history, logs, scancel, spec_text, wait_for_text
from .test_runtime_import import find_python

pytestmark = [pytest.mark.slurm, pytest.mark.torch]

STEPS, STEP_TIME = 200, 0.04  # 8 s of sleep: the signal lands in run 1, run 2 is short


def floor_spec(tmp: Path, name: str, python: str) -> str:
    """jobs/train_tiny.py (--light) on 2 nodes x 1 task with this ``python`` for slurmgen's in-job processes and
    the suite's interpreter for the program (a copy in the test's directory, which interpreters_of looks for). Its
    learning rate of 0.001 keeps every weight above 2^-10 (the smallest ends near 0.0016), where float32's spacing
    (2^-33, 1.2e-10) is above the checksum's resolution (10 decimals of an exact sum in double): the last bit of any
    one weight changes the checksum."""
    program = tmp / "train_tiny.py"
    shutil.copyfile(TRAIN, program)
    command = [PY, str(program), "--light", "--lr", "0.001"]
    text = spec_text(tmp, name, steps=STEPS, step_time=STEP_TIME, command=command)
    return text.replace("tasks_per_node: 2\n", "tasks_per_node: 1\n").replace(f"python: {PY}\n", f"python: {python}\n")


def submit_with_root_on_path(cluster: SlurmCluster, tmp: Path, text: str) -> str:
    """Render and submit with PYTHONPATH naming this repository: how 3.9 and 3.10 import slurmgen (and the
    program imports this tree's slurmgen, whichever interpreter the suite's venv installed it for)."""
    script = tmp / "job.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return str(SlurmClient(env={**cluster.env, "PYTHONPATH": str(ROOT)}).sbatch(script).job_id)


def reference_weights(cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The final weights of the same job with the suite's Python as the spec's python, uninterrupted: made once
    for the whole test run (tests/once_per_run.py)."""

    def make() -> str:
        tmp = tmp_path_factory.mktemp("floors-reference")
        job = submit_with_root_on_path(cluster, tmp, floor_spec(tmp, "floor-ref", PY))
        info = cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
        text = logs(tmp, "floor-ref", job)
        assert info.state is JobState.COMPLETED, text[-3000:]
        (weights,) = re.findall(r"final weights (\S+)", text)
        return str(weights)

    return str(once_per_run(tmp_path_factory, f"python-floors-weights-{STEPS}", make))


def interpreters_of(tmp: Path) -> dict[str, list[str]]:
    """The executables now running the job's helper (`-m slurmgen.batch`), supervisors (`-m slurmgen.task`) and
    program ranks, told by the job's log directory (under the test's) in their environment: the nodes share this
    machine's process table."""
    found: dict[str, list[str]] = {"helper": [], "supervisor": [], "program": []}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read().decode(errors="replace")
            exe = os.path.realpath(f"/proc/{entry}/exe")
        except OSError:  # ended meanwhile
            continue
        if f"SLURMGEN_LOG_DIR={tmp}/" not in environ:
            continue
        if argv[1:3] == ["-m", "slurmgen.batch"]:
            found["helper"].append(exe)
        elif argv[1:3] == ["-m", "slurmgen.task"]:
            found["supervisor"].append(exe)
        elif argv[1:2] == [str(tmp / "train_tiny.py")]:
            found["program"].append(exe)
    return found


@pytest.mark.parametrize("version", ["3.9", "3.10"])
def test_a_preemption_round_trip_with_slurmgen_on_python(
    slurm_cluster: SlurmCluster, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, version: str
) -> None:
    """python: 3.9 or 3.10 runs the batch shell's helper and both supervisors; the ranks run the suite's Python.
    The USR1 is saved at a step boundary, rank 0 requeues once, run 2 resumes at the saved step with the saved
    weights and ends with the reference's final weights, bit for bit."""
    floor = find_python(version)
    if floor is None:
        pytest.skip(f"no working python{version} here")
    name = f"floor-{version.replace('.', '')}"
    job = submit_with_root_on_path(slurm_cluster, tmp_path, floor_spec(tmp_path, name, floor))
    wait_for_text(tmp_path, name, job, r"start at step 0", count=2, timeout=180)
    running = interpreters_of(tmp_path)
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    text = logs(tmp_path, name, job)
    assert (info.state.name, info.restarts) == ("COMPLETED", 1), text[-3000:]
    # Every process slurmgen started ran on the floor; the program on the suite's interpreter.
    floor_exe, program_exe = os.path.realpath(floor), os.path.realpath(PY)
    # The helper's calls are short (begin, signal, before, restart, end; the watcher ends early where the site
    # gives no grace time): the script names the floor for each, and the run history below is what they wrote.
    script = (tmp_path / "job.sbatch").read_text()
    assert set(re.findall(r"'([^']+)' '-m' 'slurmgen\.(?:batch|task)'", script)) == {floor}
    assert set(running["helper"]) <= {floor_exe}, running
    assert running["supervisor"] == [floor_exe] * 2, running
    assert running["program"] == [program_exe] * 2, running
    assert text.count("batch shell received SIGUSR1") == 1
    assert text.count(f"requeue issued for job {job}") == 1
    assert "Traceback" not in text and "could not record" not in text, text[-3000:]
    check_resume(text)
    assert re.findall(r"final weights (\S+)", text) == [reference_weights(slurm_cluster, tmp_path_factory)]
    runs = job_history(tmp_path, name, job)
    assert [(r.run, r.cause, r.requeued_by) for r in runs] == [(1, "requested", "rank0"), (2, None, None)], runs
