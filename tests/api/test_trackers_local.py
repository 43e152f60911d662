"""Real wandb (offline) and real mlflow (file store) across a requeued local job (`slurmgen run`): the preemption
signal delivered to the batch shell once the program is training (`slurmgen run --job local-N --signal USR1`, what
`scancel --batch --signal=USR1` is on the cluster), the job requeued; each tracker keeps one run.

The signal waits for the program's first step rather than a clock (`--preempt-after`): under a loaded machine the
imports of wandb and mlflow alone can outlast any fixed time, and a stop before the first step leaves nothing to
resume from."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv

from .tracker_helpers import check_one_run_each, needs_trackers, spec_text

pytestmark = pytest.mark.slow


def test_wandb_and_mlflow_keep_one_run_across_a_local_requeue(tmp_path: Path) -> None:
    needs_trackers()
    (tmp_path / "job.yaml").write_text(spec_text(tmp_path))
    with open(tmp_path / "runner.err", "wb") as err:
        proc = subprocess.Popen(slurmgen_argv("run", "job.yaml"), cwd=tmp_path, stderr=err)
    try:
        runner = tmp_path / "runner.err"
        deadline = time.monotonic() + 240
        while not (found := re.search(r"local-(\d+):", runner.read_text())) or not (tmp_path / "step").exists():
            assert proc.poll() is None and time.monotonic() < deadline, runner.read_text()[-3000:]
            time.sleep(0.2)
        job = found[1]
        sent = run_slurmgen("run", "--job", f"local-{job}", "--signal", "USR1", cwd=tmp_path, timeout=60)
        assert sent.returncode == 0, sent.stderr
        assert proc.wait(timeout=300) == 0, runner.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: the runner ends every process of its job
            proc.wait(timeout=60)
    assert "COMPLETED, exit code 0, 2 runs" in runner.read_text(), runner.read_text()[-4000:]
    check_one_run_each(tmp_path, job)
