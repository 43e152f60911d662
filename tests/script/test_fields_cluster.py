"""The fields real sbatch scripts use (srun options, error, no time), on the real test cluster: sbatch and srun
take what slurmgen writes for them, and the job's files and limits are what the spec says."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import run_slurmgen

from slurmgen.slurm.ids import JobState

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

PROGRAM = Path(__file__).parents[1] / "task_program.py"


def test_srun_options_error_log_and_the_partitions_time_limit(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    command = json.dumps([sys.executable, str(PROGRAM), "ranks"])
    (tmp_path / "job.yaml").write_text(
        f"name: sgfields\ncommand: {command}\nnodes: 2\ntasks_per_node: 1\npython: {sys.executable}\n"
        "preemption: false\noutput: logs\nerror: errs\n"
        "srun:\n  label: true\n  distribution: block\n  overcommit: true\n  kill-on-bad-exit: false\n"
    )
    # errs/ is not there: Slurm creates no log directory, and submit creates it as it creates the output's.
    result = run_slurmgen("submit", "job.yaml", "--wait", cwd=tmp_path, env=slurm_cluster.env, timeout=300)
    assert result.returncode == 0, result.stderr
    job = result.stdout.splitlines()[0]
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal)
    assert (info.state, info.exit_code) == (JobState.COMPLETED, 0)
    # No --time: the partition's limit applies. The test cluster's partitions have MaxTime=INFINITE and no
    # DefaultTime; Slurm 22.05 shows such a job's limit as 365-00:00:00 (measured), later ones may say UNLIMITED.
    assert slurm_cluster.job_info(job)["TimeLimit"] in ("365-00:00:00", "UNLIMITED")
    # The batch shell's stderr in its own file; its stdout log no longer holds slurmgen's messages.
    errors = (tmp_path / "errs" / f"sgfields-{job}.err").read_text()
    assert "slurmgen: step ended with exit code 0" in errors
    assert "slurmgen: step ended" not in (tmp_path / "logs" / f"sgfields-{job}.log").read_text()
    # srun took the spec's options (an option it refused would have failed the step), and the logs of the ranks
    # are where they were.
    journal = [json.loads(line) for line in (tmp_path / ".slurmgen" / "journal.jsonl").read_text().splitlines()]
    script = (Path(journal[-1]["run_dir"]) / "job.sbatch").read_text()
    assert "'--kill-on-bad-exit=0' " in script and "'--label' '--distribution=block' '--overcommit'" in script
    for rank in (0, 1):
        assert f"task RANK={rank} " in (tmp_path / "logs" / f"sgfields-{job}" / f"rank-{rank}.log").read_text()
