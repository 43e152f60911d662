"""The hang watchdog without py-spy: a hung Python program started by the supervisor writes its own
stacks through faulthandler, registered at its start by slurmgen's start-up hook (slurmgen/task/program_stacks.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from runtime.runtime_helpers import base_env

from slurmgen import contract

# The main thread blocks in C on a lock (as in a collective) in a named function, beside a named second thread.
HUNG = """
import threading, time
def waits_in_a_lock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()
def helper_thread_sleeps():
    time.sleep(600)
threading.Thread(target=helper_thread_sleeps, daemon=True).start()
print("step 1", flush=True)
waits_in_a_lock()
"""


def _without_py_spy(tmp_path: Path) -> tuple[str, str]:
    """An interpreter path with no py-spy beside it, and a PATH without one: the watchdog cannot find py-spy."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.symlink_to(os.path.realpath(sys.executable))
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not os.path.exists(f"{p}/py-spy")]
    return str(python), os.pathsep.join([str(bin_dir), *path])


def _run_hung(
    tmp_path: Path, *flags: str, code: str = HUNG, args: tuple[str, ...] = (), hang_timeout: str = "2"
) -> tuple[int, str]:
    python, path = _without_py_spy(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    env = base_env(
        PATH=path,
        SLURM_JOB_ID="7",
        SLURM_PROCID="0",
        SLURM_NTASKS="1",
        SLURM_JOB_NODELIST="localhost",
        SLURMD_NODENAME="node9",
        MASTER_PORT="29999",
        **{contract.LOG_DIR: str(logs), contract.HANG_TIMEOUT: hang_timeout, contract.PREEMPT_SIGNAL: "USR1"},
        **{contract.PREEMPT_HANDLER: "requeue"},
    )
    # The interpreter outside this virtualenv still finds its packages (torch) on PYTHONPATH.
    env["PYTHONPATH"] += os.pathsep + sysconfig.get_paths()["purelib"]
    command = [python, "-m", "slurmgen.task", "--", python, *flags, "-c", code, *args]
    done = subprocess.run(command, env=env, capture_output=True, timeout=120, check=False)
    stacks = logs / "hang" / "rank-0.stacks"
    return done.returncode, stacks.read_text() if stacks.exists() else f"no stacks file; {done.stderr[-2000:]!r}"


def test_a_hung_program_without_py_spy_gets_its_own_python_stacks(tmp_path: Path) -> None:
    code, stacks = _run_hung(tmp_path)
    assert code == -9, stacks  # the watchdog ended it
    assert "py-spy is not installed" in stacks and "no stacks\n" not in stacks, stacks
    assert "written by the program itself (faulthandler" in stacks, stacks
    # Every thread, down to the function the main thread waits in (blocked in C on the lock).
    assert "line 6 in waits_in_a_lock" in stacks and "in helper_thread_sleeps" in stacks, stacks
    assert "slurmgen-torch[torch]" in stacks


def test_a_program_the_hook_cannot_reach_says_why_it_has_no_stacks(tmp_path: Path) -> None:
    code, stacks = _run_hung(tmp_path, "-I")  # -I: PYTHONPATH ignored, the hook never runs
    assert code == -9, stacks
    assert "wrote no stacks of its own" in stacks and "no stacks\n" in stacks, stacks


# Rank 0 (supervised) waits in a gloo all_reduce that rank 1 (a plain child, gone with its parent) never joins.
IN_A_COLLECTIVE = """
import datetime, os, subprocess, sys, time
import torch, torch.distributed as dist
PEER = (
    "import datetime, os, sys, time, torch.distributed as dist\\n"
    "parent = os.getppid()\\n"
    "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:' + sys.argv[1], rank=1, world_size=2,\\n"
    "                        timeout=datetime.timedelta(seconds=600))\\n"
    "while os.getppid() == parent:\\n"
    "    time.sleep(0.2)\\n"
)
subprocess.Popen([sys.executable, "-c", PEER, sys.argv[1]])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=2,
                        timeout=datetime.timedelta(seconds=600))
print("step 1", flush=True)
def waits_in_a_collective():
    dist.all_reduce(torch.ones(1))
waits_in_a_collective()
"""


@pytest.mark.torch
def test_a_program_hung_inside_a_collective_writes_its_stacks_without_py_spy(tmp_path: Path) -> None:
    """faulthandler answers from C while the main thread waits inside gloo's all_reduce (C++)."""
    pytest.importorskip("torch")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    # 10 s: importing torch on a busy machine must not pass for a hang (40 s before the first progress)
    code, stacks = _run_hung(tmp_path, code=IN_A_COLLECTIVE, args=(port,), hang_timeout="10")
    assert code == -9, stacks
    assert "written by the program itself (faulthandler" in stacks and "in waits_in_a_collective" in stacks, stacks
    assert "in all_reduce" in stacks, stacks
