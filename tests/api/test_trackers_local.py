"""Real wandb (offline) and real mlflow (file store) across a preempted and requeued local job
(`slurmgen run --local --preempt-after`): each keeps one run."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import run_slurmgen

from .tracker_helpers import check_one_run_each, needs_trackers, spec_text

pytestmark = pytest.mark.slow


def test_wandb_and_mlflow_keep_one_run_across_a_local_preemption(tmp_path: Path) -> None:
    needs_trackers()
    (tmp_path / "job.yaml").write_text(spec_text(tmp_path))
    result = run_slurmgen("run", "--local", "job.yaml", "--preempt-after", "10", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "COMPLETED, exit code 0, 2 runs" in result.stderr
    job = result.stderr.split("slurmgen: local-", 1)[1].split(":", 1)[0]
    check_one_run_each(tmp_path, job)
