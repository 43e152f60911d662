"""Goodput of a real job on the test cluster (once, on the last selected Slurm version): one job crashes (rank 0
SIGKILLs itself), hangs (the hang watchdog restarts it) and is preempted by a `high` job (PreemptMode=REQUEUE:
Slurm requeues it), then finishes in its second run. Its report tiles the wall time, counts as redone steps
exactly the steps lost that the restarts recorded, and shows the queue wait Slurm reports."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from slurm_versions import ANY, Preemption

from slurmgen import run_history
from slurmgen.script.render import render
from slurmgen.slurm.ids import JobState
from slurmgen.spec.load import load_text

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_versions(ANY)]

PROGRAM = Path(__file__).parent / "steps_program.py"


def events(tmp: Path, job: str) -> list[dict[str, object]]:
    return run_history.read(str(tmp / "logs" / f"gp-{job}"))


def count(tmp: Path, job: str, kind: str) -> int:
    return sum(e.get("event") == kind for e in events(tmp, job))


def wait(what: object, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_a_crashed_hung_and_preempted_job_reports_every_second(
    slurm_cluster: SlurmCluster, slurm_preemption: Preemption, tmp_path: Path
) -> None:
    slurm_preemption.user_signal(False)
    command = [sys.executable, str(PROGRAM), "1500", "--die-at", "60", "--hang-at", "140", "--once", str(tmp_path)]
    text = (f"name: gp\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 1\ntasks_per_node: 1\ncpus_per_task: 1\n"
            f"python: {sys.executable}\noutput: {tmp_path}/logs\npartition: {slurm_preemption.requeue}\n"
            "recovery: {hang_timeout: 20, max_restarts: 3}\n")  # fmt: skip
    script = tmp_path / "gp.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (tmp_path / "logs").mkdir()
    job = str(slurm_cluster.submit(script, "--nodelist=node1"))
    wait(lambda: count(tmp_path, job, run_history.RESTART) >= 2 and count(tmp_path, job, run_history.FIRST_STEP) >= 3)
    time.sleep(3)  # some steps after the second restart, then the preemption
    # --exclusive: the preemptor needs the whole node, so it cannot run beside the job on its free CPUs
    high = slurm_cluster.run(["sbatch", "--parsable", "-p", "high", "--nodelist=node1", "-N", "1", "--exclusive",
                              "-o", "/dev/null", "--wrap", "sleep 2"])  # fmt: skip
    assert high.returncode == 0, high.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=400)
    assert info.state is JobState.COMPLETED and info.restarts == 1, (info.state_name, info.restarts)

    done = run_slurmgen("report", job, "--json", cwd=tmp_path, env=slurm_cluster.env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    total = data["productive_seconds"] + sum(data["buckets"].values())
    assert abs(total - data["wall_seconds"]) <= 0.01 * data["wall_seconds"], data
    history = events(tmp_path, job)
    restarts = [e for e in history if e.get("event") == run_history.RESTART]
    assert [e["cause"] for e in restarts] == ["crash", "hang"]
    # each restart as `history` says it: the program saves step 40 before its should_stop(step=40), so the steps
    # lost are read from the next start's first step where it says where it began (run_history.steps_lost)
    lost = [run_history.steps_lost(history, e) for e in restarts]
    assert all(isinstance(n, int) for n in lost), restarts
    assert data["redone_steps"] == sum(n or 0 for n in lost)
    assert data["buckets"]["hang"] > 0 and data["buckets"]["queue"] > 0 and len(data["runs"]) == 2
    kinds = {m["kind"] for m in data["markers"]}
    assert {"crash", "hang", "preemption", "requeue", "save"} <= kinds, kinds
    # Slurm's own figure for the run it shows now (the second): StartTime - SubmitTime of its record
    assert info.start_time is not None and info.submit_time is not None
    slurm_wait = (info.start_time - info.submit_time).total_seconds()
    assert data["runs"][1]["slurm_queue_seconds"] == pytest.approx(slurm_wait, abs=1.0), data["runs"][1]
