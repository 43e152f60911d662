"""Real wandb (offline) and real mlflow (file store) across a preempted and requeued job on the real cluster:
the preemption signal sent to the batch shell as Slurm sends it (`scancel --batch --signal=USR1`, what
`--signal=B:` and a preemption deliver), the step stopped, the job requeued by its batch shell; each tracker keeps
one run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .tracker_helpers import check_one_run_each, needs_trackers, spec_text

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def test_wandb_and_mlflow_keep_one_run_across_a_requeue_on_the_cluster(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    needs_trackers()
    script = tmp_path / "job.sbatch"
    script.write_text(render(load_text(spec_text(tmp_path), "job.yaml").spec))
    (tmp_path / "logs").mkdir()
    job = str(slurm_cluster.submit(script))
    rank0 = tmp_path / "logs" / f"trk-{job}" / "rank-0.log"
    deadline = time.monotonic() + 240
    while "mlflow run" not in (rank0.read_text() if rank0.exists() else "") or not (tmp_path / "step").exists():
        assert time.monotonic() < deadline, (tmp_path / "logs" / f"trk-{job}.log").read_text()[-3000:]
        time.sleep(0.2)
    time.sleep(1)  # a few steps in
    result = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert result.returncode == 0, result.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=240)
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), rank0.read_text()[-3000:]
    check_one_run_each(tmp_path, job)
