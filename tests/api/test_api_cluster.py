"""The Python API on the real 3-node Slurm: submit, wait, exit code, logs, history, cancel, attach from another
process, and `slurmgen.status` of 20 jobs in one Slurm call (counted by PATH wrappers that log every call)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

import slurmgen

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

PROGRAM = Path(__file__).parents[1] / "task_program.py"
LONG = 240.0  # seconds: the cluster is shared, so a job may pend a while


def spec(path: Path, *mode: str, name: str = "sgapi") -> Path:
    command = json.dumps([sys.executable, str(PROGRAM), *mode])
    path.write_text(
        f'name: {name}\ncommand: {command}\ntime: "00:10:00"\nnodes: 1\ntasks_per_node: 1\n'
        f"python: {sys.executable}\npreemption: false\noutput: logs\n"
    )
    return path


@pytest.fixture
def on_cluster(slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """This process talks to the test cluster (its client commands and SLURM_CONF) from ``tmp_path``."""
    for name in ("PATH", "SLURM_CONF"):
        monkeypatch.setenv(name, slurm_cluster.env[name])
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    return slurm_cluster


def test_submit_wait_logs_cancel_and_attach_from_another_process(on_cluster: SlurmCluster, tmp_path: Path) -> None:
    # An already-loaded spec (the fields, as yaml.safe_load gives them) is submitted like a file.
    failing = slurmgen.submit(yaml.safe_load(spec(tmp_path / "fail.yaml", "exit", "3", name="sgfail").read_text()))
    slow = slurmgen.submit(spec(tmp_path / "slow.yaml", "slow", "400"))
    attach = (
        "import sys, slurmgen; job = slurmgen.Job(sys.argv[1]); final = job.wait(timeout=200); "
        "print(final, job.exit_code, slurmgen.Job.from_spec('sgfail').id)"
    )
    other = subprocess.Popen([sys.executable, "-c", attach, failing.id], cwd=tmp_path, env=on_cluster.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert failing.wait(timeout=LONG) == "FAILED" and failing.exit_code == 3
    out, err = other.communicate(timeout=LONG)
    assert out.split() == ["FAILED", "3", failing.id], err
    everything, rank0 = failing.logs(), failing.logs(rank=0)
    assert f"slurmgen: job {failing.id}, run 1" in everything and "task RANK=0" in everything
    assert "task RANK=0" in rank0 and "slurmgen: job" not in rank0 and failing.state() == "FAILED"
    [run] = failing.history()
    assert (run["run"], run["exit_code"]) == (1, 3)

    deadline = time.monotonic() + LONG
    while "rank 0 line 1" not in (slow.logs(rank=0) if (tmp_path / "logs" / f"sgapi-{slow.id}").exists() else ""):
        assert time.monotonic() < deadline and slow.state() in ("PENDING", "RUNNING"), slow.state()
        time.sleep(0.2)
    with pytest.raises(TimeoutError):
        slow.wait(timeout=1)
    assert slow.state() == "RUNNING" and slow.exit_code is None
    slow.cancel()
    assert slow.wait(timeout=LONG) == "CANCELLED"
    assert slurmgen.status([failing.id, slow.id]) == {failing.id: "FAILED", slow.id: "CANCELLED"}


def test_status_of_twenty_jobs_is_one_slurm_call(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for name in ("squeue", "scontrol", "sacct", "sinfo"):
        real = shutil.which(name, path=slurm_cluster.env["PATH"])
        if real is None:
            continue
        (wrappers / name).write_text(f'#!/bin/sh\necho "{name} $*" >>{log}\nexec {real} "$@"\n')
        (wrappers / name).chmod(0o755)
    jobs = []
    try:
        for _ in range(20):  # held: they never take a node
            done = slurm_cluster.run(["sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap=true"])
            assert done.returncode == 0, done.stderr
            jobs.append(done.stdout.strip().split(";")[0])
        probe = "import json, sys, slurmgen; print(json.dumps(slurmgen.status(sys.argv[1:])))"
        env = {**slurm_cluster.env, "PATH": f"{wrappers}:{slurm_cluster.env['PATH']}"}
        result = subprocess.run([sys.executable, "-c", probe, *jobs, "999999"], env=env, capture_output=True,
                                text=True, timeout=60, check=False)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {**dict.fromkeys(jobs, "PENDING"), "999999": "UNKNOWN"}
        calls = log.read_text().splitlines()
        assert len(calls) == 1 and calls[0].startswith("squeue ") and ",".join(jobs) in calls[0], calls
    finally:
        if jobs:
            slurm_cluster.run(["scancel", *jobs])


ECHO = """\
import json, os, sys
keys = ("OMP_NUM_THREADS", "PER_RANK", "SLURM_PROCID")
print(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in keys}}), flush=True)
"""


def test_args_and_variables_reach_every_task_on_the_cluster(on_cluster: SlurmCluster, tmp_path: Path) -> None:
    """`slurmgen.submit(..., args=[...])` on a real 2-node job: the words arrive as given after the command, the
    batch shell expands `${SLURM_CPUS_PER_TASK}` (set by sbatch --cpus-per-task) and each task its own
    `${SLURM_PROCID}`."""
    (tmp_path / "echo.py").write_text(ECHO)
    command = json.dumps([sys.executable, str(tmp_path / "echo.py"), "--rank=${SLURM_PROCID}"])
    path = tmp_path / "vars.yaml"
    path.write_text(
        f'name: sgvars\ncommand: {command}\ntime: "00:10:00"\nnodes: 2\ntasks_per_node: 1\ncpus_per_task: 1\n'
        f"python: {sys.executable}\npreemption: false\noutput: logs\n"
        "env: {OMP_NUM_THREADS: '${SLURM_CPUS_PER_TASK}', PER_RANK: 'r${SLURM_PROCID}'}\n"
    )
    given = ["--lr", "3e-4", "two words", "it's", "$5", "a;id", "$${KEEP}"]
    job = slurmgen.submit(path, args=given)
    assert job.wait(timeout=LONG) == "COMPLETED", job.logs()
    got = sorted(
        (json.loads(line) for log in (tmp_path / "logs").glob(f"sgvars-{job.id}/rank-*.log")
         for line in log.read_text().splitlines() if line.startswith("{")),
        key=lambda line: str(line["env"]["SLURM_PROCID"]),
    )  # fmt: skip
    assert [line["argv"] for line in got] == [
        ["--rank=0", "--lr", "3e-4", "two words", "it's", "$5", "a;id", "${KEEP}"],
        ["--rank=1", "--lr", "3e-4", "two words", "it's", "$5", "a;id", "${KEEP}"],
    ]
    assert [line["env"] for line in got] == [
        {"OMP_NUM_THREADS": "1", "PER_RANK": "r0", "SLURM_PROCID": "0"},
        {"OMP_NUM_THREADS": "1", "PER_RANK": "r1", "SLURM_PROCID": "1"},
    ]
