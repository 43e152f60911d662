"""Local jobs as jobs: how the emulated Slurm ends them, and the job commands (status, logs, history, cancel,
resume) on `local-N` ids, with real runs of the runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from runtime.runtime_helpers import without_steering

from slurmgen.local.fake_scontrol import ENDING, show_job
from slurmgen.slurm.showjob import job_info, parse_show_job

QUICK = """\
name: quick
command:
  - python3
  - -c
  - "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); \\
pathlib.Path('up').touch(); time.sleep(600)"
time: "00:10:00"
preemption: false
"""

# The job's clock jumps to 1 s before its 10 min limit once the task is up; from then on it runs at real speed, so
# KillWait (10 s) is real seconds.
JUMP_CLOCK = """
import os, sys, time
from pathlib import Path
from slurmgen.local import command, setup
clock = lambda: time.monotonic() + (599 if os.path.exists("up") else 0)
err = lambda line: print(line, file=sys.stderr)
sys.exit(command.run_local(Path("quick.yaml"), setup.Options(), err, clock=clock))
"""


def test_fake_scontrol_shows_a_job_at_its_time_limit_as_ending(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "7", "SLURMGEN_LOCAL_DIR": str(tmp_path)}
    (record,) = parse_show_job(show_job(["7"], env))
    info = job_info(record)
    assert info.state_name == "RUNNING"
    (tmp_path / ENDING).write_text("TIMEOUT\n")  # the runner reached the limit and is ending the job
    (record,) = parse_show_job(show_job(["7"], env))
    info = job_info(record)
    assert (info.state_name, info.reason, info.restarts) == ("COMPLETING", "TimeLimit", 0)


@pytest.mark.slow
def test_a_local_timeout_ends_at_the_term_not_after_kill_wait(tmp_path: Path) -> None:
    """A task that exits at SIGTERM: the job ends as soon as it has, without the SIGKILL after KillWait (the
    batch shell's helper used to wait for a step to stop while the emulated Slurm still said RUNNING)."""
    (tmp_path / "quick.yaml").write_text(QUICK)
    result = subprocess.run(
        [sys.executable, "-c", JUMP_CLOCK],
        cwd=tmp_path,
        env=without_steering(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = result.stderr
    assert result.returncode == 124, err
    assert "time limit 00:10:00 reached: SIGTERM to every process, SIGKILL after 10 s" in err
    assert "TIMEOUT, exit code 124" in err
    assert "SIGKILL to the processes still running" not in err
