"""Setup and teardown on the real 3-node Slurm: the user's `set -xeo pipefail` in setup and a preemption signal
delivered as `--signal=B:` delivers it; the batch shell forwards it, requeues, and the job resumes to completion;
teardown runs at the end of both runs. The same story runs locally in tests/local/test_local_setup.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SlurmCluster

from .cluster_jobs import PY, ROOT, job_history, read_log, scancel, submit
from .test_handlers_cluster import wait_text

pytestmark = [pytest.mark.slurm]

PROGRAMS = ROOT / "tests" / "task_program.py"


def test_set_xeo_pipefail_setup_a_preemption_signal_requeues_and_teardown_runs_each_run(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    name = "setup-preempt"
    torn = tmp_path / "torn"
    text = (
        f"name: {name}\ncommand: {[PY, str(PROGRAMS), 'requeue-me']!r}\ntime: '00:10:00'\nnodes: 2\n"
        f"tasks_per_node: 1\ncpus_per_task: 1\npython: {PY}\noutput: {tmp_path}/logs\n"
        "preemption: {handler: requeue, lead_time: 60}\n"
        "setup: ['set -xeo pipefail', 'echo ready | cat', 'export FROM_SETUP=1']\n"
        f"teardown: ['echo \"run ${{SLURM_RESTART_COUNT:-0}}\" >>{torn}']\n"
    )
    job = submit(slurm_cluster, tmp_path, text)
    wait_text(tmp_path, name, job, "rank-0.log", r"task RANK=0")
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)  # as --signal=B: delivers it
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=240)
    batch = read_log(tmp_path, name, job, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), batch[-3000:]
    run1 = batch[: batch.index("run 2,")]
    assert "batch shell received SIGUSR1" in run1 and f"requeue issued for job {job}" in run1, run1
    assert "+ _sg_forward" not in batch  # the user's xtrace ended with setup: slurmgen's trap was not traced
    assert torn.read_text() == "run 0\nrun 1\n", batch[-3000:]
    runs = job_history(tmp_path, name, job)
    assert [r.requeued_by for r in runs] == ["batch-shell", None], runs
