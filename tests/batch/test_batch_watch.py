"""The batch shell's preemption watcher (slurmgen/batch/watch.py) as real processes: a bash shell that
traps the preemption signal and starts the watcher as the rendered script does (its child, given its own pid),
and a scontrol stand-in on PATH answering with recorded `scontrol show job` output (tests/data/slurm/)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm

from slurmgen import contract, run_history

# $0 is the path prefix of the shell's files. The shell starts the watcher in the background with its own pid,
# waits for it, keeps its exit code, and stays up (as the batch shell does while the step runs).
SHELL = (
    'trap \'echo USR1 >> "$0.got"\' USR1; "$@" "$$" USR1 2>"$0.err" & w=$!; echo "$w" > "$0.watcher"; '
    'while kill -0 "$w" 2>/dev/null; do sleep 0.05; done; wait "$w"; echo "$?" > "$0.rc"; '
    "while :; do sleep 0.05; done"
)


@pytest.fixture
def shells() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for shell in started:
        shell.kill()
        shell.wait(timeout=10)


def gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie waiting for init)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_for(what: Callable[[], object], seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def start(tmp_path: Path, fake: FakeSlurm, shells: list[subprocess.Popen[bytes]], site: dict[str, object] | None = None,
          **more: str) -> int:  # fmt: skip
    """Start the shell and its watcher; the watcher's pid."""
    bin_dir = fake.install(tmp_path / "bin")
    log_dir = tmp_path / "logs"
    log_dir.mkdir(exist_ok=True)
    if site is not None:
        run_history.append(str(log_dir), "batch-shell", run_history.RUN_START, 1, time.time(), site=site)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_JOB_ID="30", SLURMGEN_LOG_DIR=str(log_dir))
    env[contract.PREEMPT_POLL] = "0.1"
    env.update(more)
    argv = ["bash", "-c", SHELL, str(tmp_path / "shell"), sys.executable, "-m", "slurmgen.batch", "watch"]
    shells.append(subprocess.Popen(argv, env=env))
    wait_for(lambda: (tmp_path / "shell.watcher").exists() and (tmp_path / "shell.watcher").read_text().strip())
    return int((tmp_path / "shell.watcher").read_text())


def ended(tmp_path: Path) -> int:
    wait_for(lambda: (tmp_path / "shell.rc").exists() and (tmp_path / "shell.rc").read_text().strip())
    return int((tmp_path / "shell.rc").read_text())


def test_a_preemption_without_its_signal_sends_the_signal_to_the_batch_shell(
    tmp_path: Path, shells: list[subprocess.Popen[bytes]]
) -> None:
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    start(tmp_path, fake, shells)
    assert ended(tmp_path) == 0
    wait_for(lambda: (tmp_path / "shell.got").exists())
    assert (tmp_path / "shell.got").read_text().split() == ["USR1"]
    err = (tmp_path / "shell.err").read_text()
    assert "Slurm shows PreemptTime=" in err and "acting as if it had" in err, err
    assert len(fake.commands("scontrol")) == 1


def test_a_notice_that_came_is_not_sent_again(tmp_path: Path, shells: list[subprocess.Popen[bytes]]) -> None:
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / contract.BATCH_SIGNALS_FILE).write_text("CONT\nUSR1\n")
    start(tmp_path, fake, shells)
    assert ended(tmp_path) == 0
    assert not (tmp_path / "shell.got").exists()
    assert fake.commands("scontrol") == []


def test_a_site_without_grace_time_is_not_watched(tmp_path: Path, shells: list[subprocess.Popen[bytes]]) -> None:
    """PreemptMode=REQUEUE with GraceTime=0 (as recorded at the run's start): Slurm requeues at once and the TERM
    is the notice, so the watcher ends at once and never asks Slurm."""
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    start(tmp_path, fake, shells, site={"mode": "REQUEUE", "grace": 0, "preempt_type": "preempt/partition_prio"})
    assert ended(tmp_path) == 0
    assert fake.commands("scontrol") == [] and not (tmp_path / "shell.got").exists()


def test_a_running_job_is_watched_until_its_shell_is_killed_and_no_watcher_is_left(
    tmp_path: Path, shells: list[subprocess.Popen[bytes]]
) -> None:
    """The shell dies of SIGKILL (as at the end of a grace time): the watcher, which kept asking, dies with it."""
    fake = FakeSlurm().on("scontrol", recording="show-job-o-running")
    watcher = start(tmp_path, fake, shells, site={"mode": "REQUEUE", "grace": 60, "preempt_type": "preempt/qos"})
    wait_for(lambda: len(fake.commands("scontrol")) >= 3)
    shells[0].send_signal(signal.SIGKILL)
    shells[0].wait(timeout=10)
    wait_for(lambda: gone(watcher), seconds=5)
    assert not (tmp_path / "shell.got").exists()


def test_slurm_not_answering_sends_nothing_and_is_said_once(
    tmp_path: Path, shells: list[subprocess.Popen[bytes]]
) -> None:
    fake = FakeSlurm().on("scontrol", err="slurm_load_jobs error: Socket timed out on send/recv operation", rc=1)
    watcher = start(tmp_path, fake, shells)
    wait_for(lambda: len(fake.commands("scontrol")) >= 4)
    os.kill(watcher, signal.SIGTERM)  # as the batch shell ends it after the step
    assert ended(tmp_path) == 128 + signal.SIGTERM
    assert not (tmp_path / "shell.got").exists()
    assert (tmp_path / "shell.err").read_text().count("cannot ask Slurm about job 30") == 1


def test_a_local_run_is_not_watched(tmp_path: Path, shells: list[subprocess.Popen[bytes]]) -> None:
    """Inside `slurmgen run` the emulated preemption always delivers its signal: no looks, each a process."""
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    start(tmp_path, fake, shells, SLURMGEN_LOCAL_DIR=str(tmp_path / "control"))
    assert ended(tmp_path) == 0
    assert fake.commands("scontrol") == [] and not (tmp_path / "shell.got").exists()
