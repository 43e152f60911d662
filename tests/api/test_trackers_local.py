"""Real wandb (offline) and real mlflow (file store) across a requeued local job (`slurmgen run`): the preemption
signal delivered to the batch shell once the program is training (`slurmgen run --job local-N --signal USR1`, what
`scancel --batch --signal=USR1` is on the cluster), the job requeued; each tracker keeps one run.

The signal waits for the program's first step rather than a clock (`--preempt-after`): under a loaded machine the
imports of wandb and mlflow alone can outlast any fixed time, and a stop before the first step leaves nothing to
resume from."""

from __future__ import annotations

from pathlib import Path

import pytest
from local.test_local_handlers import LocalJob

from .tracker_helpers import check_one_run_each, needs_trackers, spec_text

pytestmark = pytest.mark.slow


def test_wandb_and_mlflow_keep_one_run_across_a_local_requeue(tmp_path: Path, jobs: list[LocalJob]) -> None:
    needs_trackers()
    job = LocalJob(tmp_path, spec_text(tmp_path))
    jobs.append(job)
    job.wait_for(lambda: (tmp_path / "step").exists(), timeout=240)  # the program's first step is saved
    job.signal("USR1")
    assert job.finish(timeout=300) == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner, job.runner[-4000:]
    check_one_run_each(tmp_path, job.job_id())
