"""A sweep submitted from a laptop to the test cluster through a real sshd (the login node of cluster_login.py):
its points run with their own values, and `status`, `logs`, `cancel` and slurmgen.Sweep/Job take just the ids the
submit printed. The login node's `scontrol show config` says MaxArraySize=2 (a wrapper in front of the real one),
so three points are cut into two arrays as on a cluster with that limit; everything else is the cluster's own."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from ssh_server import Sshd

from remote.cluster_login import client_env, logs_of, project, start_login

pytestmark = pytest.mark.slurm

PROGRAM = (
    "import os, time\n"
    "print('point', os.environ['X'], os.environ['SLURMGEN_SWEEP_INDEX'], flush=True)\n"
    "time.sleep(60 if os.environ['X'] == 'slow' else 0)\n"
)
SPEC = "preemption: false\nenv: {X: '{x}'}\nsweep:\n  points: [{x: a}, {x: b}, {x: slow}]\n"


@pytest.fixture
def split_login(slurm_cluster: SlurmCluster) -> Iterator[Sshd]:
    """The cluster's login node, whose `scontrol show config` reports MaxArraySize=2 (slurm.conf(5): task ids
    0-1), the rest of its answer and every other command the cluster's own."""
    slurm_bin = slurm_cluster.env["PATH"].split(":")[0]
    wrappers = Path(tempfile.mkdtemp(prefix="sg-split-", dir="/tmp"))
    real = subprocess.run(["bash", "-c", f"PATH={slurm_bin}:$PATH command -v scontrol"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    (wrappers / "scontrol").write_text(
        f'#!/bin/bash\nif [ "$*" = "show config" ]; then\n  {real} show config | '
        f"sed 's/^MaxArraySize .*/MaxArraySize            = 2/'; exit ${{PIPESTATUS[0]}}\nfi\n"
        f'exec {real} "$@"\n'
    )
    (wrappers / "scontrol").chmod(0o755)
    server = start_login(slurm_cluster, path_prepend=str(wrappers))
    yield server
    server.close_master()
    server.remove()
    shutil.rmtree(wrappers, ignore_errors=True)


def until(check: Callable[[], dict[int, str]], want: dict[int, str], timeout: float = 60) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    seen: dict[int, str] = {}
    while time.monotonic() < deadline:
        seen = {k: v.split(" ")[0] for k, v in check().items()}
        if seen == want:
            return seen
        time.sleep(1)
    raise AssertionError(f"the points stayed {seen}, not {want}")


def test_a_sweep_over_ssh_runs_each_point_and_status_logs_cancel_take_its_ids(
    split_login: Sshd, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slurmgen

    repo = project(split_login, "sweeps", "rsweep", PROGRAM, SPEC)
    env = {k: v for k, v in client_env(split_login).items() if not k.startswith(("SSH_ASKPASS", "DISPLAY"))}
    submitted = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
    assert submitted.returncode == 0, submitted.stderr
    sweep_id = submitted.stdout.strip()
    found = re.search(rf"submitted sweep {sweep_id} on cluster alpha as array job\(s\) (\d+), (\d+);", submitted.stderr)
    assert found, submitted.stderr  # MaxArraySize 2: points 0-1 in the first array, point 2 in the second
    first, second = found[1], found[2]

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(repo)
    sweep = slurmgen.Sweep(sweep_id)
    until(sweep.status, {0: "COMPLETED", 1: "COMPLETED", 2: "RUNNING"})
    assert "point a 0" in sweep.job(0).logs()  # slurmgen.Job of a point, by its array task's id

    # each point ran with its own values, its task id plus its array's offset giving its index
    logs = split_login.root / "work" / "runs" / "rsweep" / "logs"
    assert "point a 0" in logs_of(f"{logs}/rsweep-{first}_0")  # the ranks' logs of array task {first}_0
    assert "point b 1" in logs_of(f"{logs}/rsweep-{first}_1")
    # RUNNING is Slurm's word once the batch shell starts: the program's first line comes a moment later
    deadline = time.monotonic() + 30
    while "point slow 2" not in (slow := logs_of(f"{logs}/rsweep-{second}_0")) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "point slow 2" in slow

    status = run_slurmgen("status", sweep_id, cwd=repo, env=env)
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines()[1:] if line.strip()]
    assert [r[:4] for r in rows[:3]] == [
        ["0", "x=a", f"{first}_0", "COMPLETED"],
        ["1", "x=b", f"{first}_1", "COMPLETED"],
        ["2", "x=slow", f"{second}_0", "RUNNING"],
    ], status.stdout
    assert "cluster alpha" in status.stderr, status.stderr

    point = run_slurmgen("logs", f"{first}_1", cwd=repo, env=env)  # the id status printed for point 1
    assert point.returncode == 0 and "point b 1" in point.stdout, point.stdout + point.stderr

    cancelled = run_slurmgen("cancel", sweep_id, cwd=repo, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    said = cancelled.stdout + cancelled.stderr
    assert f"cancelled array {second} of sweep {sweep_id}" in said and f"array {first} " not in said, said
    until(sweep.status, {0: "COMPLETED", 1: "COMPLETED", 2: "CANCELLED"})

    entries = [json.loads(line) for line in (split_login.root / "journal" / "journal.jsonl").read_text().splitlines()]
    arrays = [e for e in entries if e["event"] == "submitted" and e["extra"].get("sweep") == sweep_id]
    assert [(e["job_id"], e["cluster"], e["extra"]["profile"], e["extra"]["offset"]) for e in arrays] == [
        (first, "alpha", "alpha", 0),
        (second, "alpha", "alpha", 2),
    ]
    assert split_login.accepted() == 1  # the submit, the commands and this process: one login
