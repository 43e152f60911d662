"""Setup, setup_fail_fast and teardown on whole local runs (`slurmgen run`): the rendered script in a real bash,
the fake srun and scontrol, real processes and real signals. What a setup item does to the shell (set -e, set -x,
pipefail) must not reach slurmgen's own lines: the signal path, the restarts, the run's record."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from local.test_local_handlers import PROGRAMS, LocalJob, spec
from local.test_local_run import FAST, final_weights, job_dir, logs_of, ranks_text, run_to_completion, workdir

pytestmark = pytest.mark.slow

PY = sys.executable


def test_a_failing_setup_line_ends_the_job_before_the_step_with_one_line(tmp_path: Path, jobs: list[LocalJob]) -> None:
    """No `set -e` of the user's: the second item fails (exit 3), so the step never starts; the batch log has one
    line naming the item, its text, its exit code and the log; the run is recorded as a failed run with that code
    (history); the items after it do not run, and teardown does."""
    items = "setup: ['export A=1', 'sh -c \"exit 3\"', 'touch after-the-failure']\nteardown: ['touch torn-down']\n"
    job = LocalJob(tmp_path, spec([PY, "-c", "open('step-ran', 'w').close()"], preemption="false", extra=items))
    jobs.append(job)
    assert job.finish() == 3, job.everything()
    batch = job.file("batch")
    log = tmp_path / "logs" / f"job-{job.job_id()}.log"
    said = [line for line in batch.splitlines() if "setup[" in line]
    assert said == [
        f'slurmgen: setup[1] (sh -c "exit 3") failed with exit code 3: the step does not start (its output is '
        f"above, in {log})"
    ], batch
    assert "rendezvous at" not in batch
    assert not (tmp_path / "step-ran").exists() and not (tmp_path / "after-the-failure").exists()
    assert (tmp_path / "torn-down").exists()
    (run,) = job.history()
    assert (run.exit_code, run.failing, run.ended) == (3, 'setup[1] `sh -c "exit 3"` (exit 3)', "failed")
    assert "FAILED, exit code 3" in job.runner
    shown = run_slurmgen("history", f"local-{job.job_id()}", cwd=tmp_path, timeout=60)
    assert shown.returncode == 0 and 'setup[1] `sh -c "exit 3"` (exit 3)' in shown.stdout, shown.stdout


def test_set_e_in_setup_ends_it_at_the_failing_command_and_the_run_is_recorded(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """`set -eu` of the user's ends the shell inside a block item (an unset variable): the EXIT trap still says the
    one line and records the failed run, so the job is not left as one that never ended."""
    items = 'setup:\n  - set -eu\n  - |\n    echo first\n    echo "$NOT_SET_ANYWHERE"\n    touch not-reached\n'
    job = LocalJob(tmp_path, spec([PY, "-c", "pass"], preemption="false", extra=items))
    jobs.append(job)
    assert job.finish() == 1, job.everything()
    batch = job.file("batch")
    assert "NOT_SET_ANYWHERE: unbound variable" in batch
    assert "slurmgen: setup[1] (echo first ...) failed with exit code 1: the step does not start" in batch, batch
    assert not (tmp_path / "not-reached").exists()
    (run,) = job.history()
    assert (run.exit_code, run.ended) == (1, "failed")


def test_without_fail_fast_the_step_starts_anyway_and_says_so(tmp_path: Path, jobs: list[LocalJob]) -> None:
    items = "setup_fail_fast: false\nsetup: ['false', 'export B=2']\n"
    job = LocalJob(
        tmp_path, spec([PY, "-c", "import os; assert os.environ['B'] == '2'"], preemption="false", extra=items)
    )
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "setup[0] (false) exited with code 1; the step starts anyway (setup_fail_fast: false)" in job.file("batch")


HEREDOC = """\
setup:
  - set -e
  - |
    mkdir -p made-by-setup
    cat <<EOF >made-by-setup/config.txt
    lr=0.1
    exit
    EOF
    for part in a b; do
      echo "$part" >>made-by-setup/config.txt
    done
    cd made-by-setup
    export FROM_SETUP="$(wc -l <config.txt)"
teardown:
  - |
    echo "teardown in $PWD" >>"$OLDPWD/torn-down"
    exit 7
"""


def test_set_e_setup_a_heredoc_and_a_program_that_exits_3_restarts_once_and_records_the_end(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """A heredoc, a loop and `cd` in one block item, under the user's `set -e`: they run as written and reach the
    step (its working directory, an exported variable). Rank 1 exits 3 under recovery {max_restarts: 1}: the step
    is restarted once (set -e did not end the batch shell at the failed step's wait), the job exits 3 naming rank 1
    as failed first, and the run's end is recorded. Teardown runs once, after the last start, in the directory
    setup left; its own `exit 7` changes neither the job's code nor its outcome."""
    check = (
        "import os, sys, time; assert os.path.exists('config.txt') and os.environ['FROM_SETUP'] == '4'; "
        "sys.exit(3) if os.environ['RANK'] == '1' else time.sleep(120)"
    )
    fail = [PY, "-c", check]
    spec_text = spec(fail, preemption="false", extra="recovery: {max_restarts: 1}\n" + HEREDOC)
    job = LocalJob(tmp_path, spec_text)
    jobs.append(job)
    assert job.finish() == 3, job.everything()
    batch = job.file("batch")
    assert (tmp_path / "made-by-setup" / "config.txt").read_text() == "lr=0.1\nexit\na\nb\n"
    assert batch.count("rendezvous at") == 2, batch  # restarted once inside the allocation
    assert "rank 1 on 127.0.0.1 failed first: its program exited with code 3; the job exits 3" in batch, batch
    (run,) = job.history()
    assert (run.exit_code, run.failing) == (3, "rank 1 on 127.0.0.1 (exit 3)"), run
    assert len(run.restarts) == 1, run.restarts
    assert (tmp_path / "torn-down").read_text() == f"teardown in {tmp_path / 'made-by-setup'}\n"
    assert "slurmgen: teardown[0] exited with code 7 (the job's exit code is not changed)" in batch
    assert "FAILED, exit code 3" in job.runner


def test_set_x_e_setup_and_a_preemption_signal_requeue_and_teardown_runs_in_each_run(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """`set -x -e` and `set -o pipefail` in setup, then the preemption signal (`--preempt-after`) while the step
    runs: the batch shell is not killed by it (xtrace and errexit were put back after setup), the step is stopped
    and the job requeued, run 2 completes. The user's own `trap ... USR1` held only while setup ran: slurmgen's
    trap is back for the step. Teardown runs at the end of both runs, after the run's record."""
    items = (
        "setup: ['set -x -e', 'set -o pipefail', 'export X=1', 'trap \"echo user-trap\" USR1']\n"
        "teardown: ['echo \"run ${SLURM_RESTART_COUNT:-0}\" >>torn']\n"
    )
    job = LocalJob(
        tmp_path,
        spec([PY, str(PROGRAMS), "requeue-me"], preemption="{handler: requeue}", extra=items),
        "--preempt-after",
        "3",
    )
    jobs.append(job)
    assert job.finish() == 0, job.everything()
    assert "COMPLETED, exit code 0, 2 runs" in job.runner, job.runner
    batch = job.file("batch")
    assert "batch shell received SIGUSR1" in batch and "user-trap" not in batch.replace("echo user-trap", ""), batch
    assert (tmp_path / "torn").read_text() == "run 0\nrun 1\n", batch
    first, second = job.history()
    assert first.requeued_by is not None and first.cause == "preemption", first
    assert second.exit_code == 0 and second.ended == "completed", second
    # After setup, the xtrace of the user's `set -x` is off again: slurmgen's own lines are not traced.
    after = batch.split("slurmgen: rendezvous at", 1)[1].split(", run 2, started", 1)[0]  # run 1, from its step
    assert "preemption" in after.lower() or "SIGTERM" in after, after
    assert "+ _sg_" not in after and "+ wait" not in after, after


@pytest.mark.torch
def test_set_eo_pipefail_setup_and_a_preemption_resume_to_completion(tmp_path: Path) -> None:
    """The CPU example with `set -eo pipefail` in setup (and a pipeline of its own), preempted at 5 s
    (`slurmgen run --preempt-after`): it saves, requeues and resumes to completion, as it does without setup."""
    cwd = workdir(tmp_path)
    slow = FAST.replace("]", ', --step-time, "0.05"]')
    setup = "setup=[set -eo pipefail, 'echo ready | cat', 'export OMP_NUM_THREADS=1']"
    err = run_to_completion(cwd, "--set", slow, "--set", setup, "--preempt-after", "5")
    assert "COMPLETED, exit code 0, 2 runs in" in err, logs_of(cwd) + err
    batch = job_dir(cwd).with_suffix(".log").read_text()
    assert batch.count("ready\n") == 2 and "batch shell received SIGUSR1" in batch, batch
    log = ranks_text(cwd)
    assert re.search(r"rank 0/4: start at step [1-9]\d*\b.*run 2", log), log
    assert final_weights(log)
