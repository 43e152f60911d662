"""The batch shell's preemption watcher (slurmgen/runtime/batch_watch.py) as real processes: a bash shell that
traps the preemption signal, the watcher beside it, and a scontrol stand-in on PATH answering with recorded
`scontrol show job` output (tests/data/slurm/)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fake_slurm import FakeSlurm

from slurmgen import contract

TRAP = 'trap \'echo USR1 >> "$0.got"\' USR1; echo ready > "$0.ready"; while :; do sleep 0.05; done'


def start_shell(tmp_path: Path) -> subprocess.Popen[bytes]:
    shell = subprocess.Popen(["bash", "-c", TRAP, str(tmp_path / "shell")])
    deadline = time.monotonic() + 10
    while not (tmp_path / "shell.ready").exists():
        assert time.monotonic() < deadline, "the shell did not start"
        time.sleep(0.02)
    return shell


def watcher_command(tmp_path: Path, fake: FakeSlurm, shell_pid: int) -> tuple[list[str], dict[str, str]]:
    bin_dir = fake.install(tmp_path / "bin")
    log_dir = tmp_path / "logs"
    log_dir.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_JOB_ID="30", SLURMGEN_LOG_DIR=str(log_dir))
    env[contract.PREEMPT_POLL] = "0.1"
    return [sys.executable, "-m", "slurmgen.runtime.batch", "watch", str(shell_pid), "USR1"], env


def run_watcher(tmp_path: Path, fake: FakeSlurm, shell_pid: int) -> subprocess.CompletedProcess[str]:
    argv, env = watcher_command(tmp_path, fake, shell_pid)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=20, check=False)


def stop(shell: subprocess.Popen[bytes]) -> None:
    shell.kill()
    shell.wait(timeout=10)


def test_a_preemption_without_its_signal_sends_the_signal_to_the_batch_shell(tmp_path: Path) -> None:
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    shell = start_shell(tmp_path)
    try:
        result = run_watcher(tmp_path, fake, shell.pid)
        deadline = time.monotonic() + 10
        while not (tmp_path / "shell.got").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "shell.got").read_text().split() == ["USR1"], result.stderr
    finally:
        stop(shell)
    assert result.returncode == 0
    assert "Slurm shows PreemptTime=" in result.stderr and "acting as if it had" in result.stderr
    assert len(fake.commands("scontrol")) == 1


def test_a_notice_that_came_is_not_sent_again(tmp_path: Path) -> None:
    fake = FakeSlurm().on("scontrol", recording="show-job-o-preempt-grace")
    shell = start_shell(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / contract.BATCH_SIGNALS_FILE).write_text("CONT\nUSR1\n")
    try:
        result = run_watcher(tmp_path, fake, shell.pid)
    finally:
        stop(shell)
    assert result.returncode == 0 and not (tmp_path / "shell.got").exists(), result.stderr
    assert fake.commands("scontrol") == []


def test_a_job_not_preempted_is_left_alone_until_its_shell_ends(tmp_path: Path) -> None:
    fake = FakeSlurm().on("scontrol", recording="show-job-o-running")
    shell = start_shell(tmp_path)
    argv, env = watcher_command(tmp_path, fake, shell.pid)
    watcher = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 15
        while len(fake.commands("scontrol")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop(shell)
    _, err = watcher.communicate(timeout=20)
    assert watcher.returncode == 0, err
    assert not (tmp_path / "shell.got").exists()
    assert len(fake.commands("scontrol")) >= 3  # it kept asking while the job ran, and ended with its shell
