"""The hang watchdog, run by each task's supervisor (the program's parent) beside the program.

Progress is the newest of: any rank's log growing (everything a program prints goes to its rank log, so a program
that never imports slurmgen makes progress by printing: handler `requeue` or `program`), and any rank's progress
mark, which slurmgen's per-step `Preemption.should_stop()` touches (`progress/rank-<N>` in the job's log dir, at
most once a second). Until the first progress of any rank in this start of the step the limit is START_FACTOR
hang timeouts (importing torch and loading a model on a busy node can take longer than a hang timeout short enough
to be useful); after it, when no rank has progressed for recovery.hang_timeout seconds, each supervisor:
- writes its program's Python stacks, every thread, into `<log dir>/hang/rank-<N>.stacks`, headed by the rank,
  the node and when the rank last progressed. py-spy reads them from outside (`py-spy dump --pid`), which works
  for a program that never imports slurmgen and for one stuck in C code or a collective, where an in-process
  dump (faulthandler) would need the program's cooperation; the supervisor is the program's parent, so Linux's
  default Yama ptrace_scope=1 lets it attach;
- records a `hang` event (rank, node, last progress) in the run history, from which the batch shell says which
  ranks stopped first (batch/restart.py);
- waits (bounded) until every rank has written its stacks, then kills the program (SIGKILL): the step ends, and
  the batch shell restarts it inside the allocation.

On GPUs the rendered environment also turns on torch's NCCL flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) and
its dump on a watchdog timeout into the same `hang/` directory (TORCH_NCCL_DEBUG_INFO_TEMP_FILE): see
`nccl_trace_env`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping

from slurmgen import contract, run_history, trust
from slurmgen.job_context import restart_count_from
from slurmgen.progress_mark import PROGRESS_DIR, ProgressMark, progress_path, steps_marked

__all__ = ["PROGRESS_DIR", "ProgressMark", "progress_path", "steps_marked"]  # kept here for their readers

HANG_DIR = "hang"
DUMP_TIMEOUT = 30.0  # seconds for one py-spy dump
NCCL_TRACE_ENTRIES = "2000"
START_FACTOR = 4  # before any rank's first progress the limit is this many hang timeouts: start-up is slow


def poll_interval(timeout: float) -> float:
    return max(0.2, min(5.0, timeout / 10))


def last_progress(log_dir: str, since: float) -> float:
    """The newest progress of any rank (epoch seconds): rank logs and progress marks, never before ``since``."""
    newest = since
    for folder, prefix in ((log_dir, "rank-"), (os.path.join(log_dir, PROGRESS_DIR), "rank-")):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith(prefix):
                        with contextlib.suppress(OSError):
                            info = entry.stat()
                            # A rank log is created empty when its task starts: that is no progress yet.
                            if info.st_size or folder != log_dir:
                                newest = max(newest, info.st_mtime)
        except OSError:
            continue
    return newest


def dumped_since(log_dir: str, since: float) -> int:
    """How many ranks wrote their stacks since ``since``."""
    try:
        with os.scandir(os.path.join(log_dir, HANG_DIR)) as entries:
            return sum(1 for e in entries if e.name.endswith(".stacks") and e.stat().st_mtime >= since)
    except OSError:
        return 0


def own_progress(log_dir: str, rank: int, since: float) -> float:
    times = [since]
    for path in (os.path.join(log_dir, contract.rank_log_name(rank)), progress_path(log_dir, rank)):
        with contextlib.suppress(OSError):
            times.append(os.stat(path).st_mtime)
    return max(times)


def dump_stacks(pid: int) -> str:
    """Every thread's Python stack of ``pid`` by py-spy, or why there are none."""
    # Installed with slurmgen[torch] next to this interpreter; a job's PATH need not include a virtualenv's bin/.
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    tool = beside if os.access(beside, os.X_OK) else shutil.which("py-spy")
    if tool is None:
        return "py-spy is not installed for this Python (pip install 'slurmgen[torch]' brings it): no stacks\n"
    try:
        done = subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, text=True,
                              timeout=DUMP_TIMEOUT, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"py-spy dump failed: {exc}\n"
    return done.stdout + (f"py-spy: {done.stderr.strip()}\n" if done.returncode else "")


def on_hang(env: Mapping[str, str], rank: int, pid: int, started: float, now: float, run: int) -> str:
    """Write the stacks and the hang event; returns the stacks file."""
    log_dir = env[contract.LOG_DIR]
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    mine = own_progress(log_dir, rank, started)
    folder = os.path.join(log_dir, HANG_DIR)
    trust.own_dir(folder)
    path = os.path.join(folder, f"rank-{rank}.stacks")
    head = (f"rank {rank} on {node}, pid {pid}: no progress on any rank for {now - last_progress(log_dir, started):.0f}"
            f" s; this rank last progressed at {time.strftime('%H:%M:%S', time.localtime(mine))}\n")  # fmt: skip
    with os.fdopen(trust.open_write(path, mode=0o644), "a", encoding="utf-8") as out:  # never through a link
        out.write(head + dump_stacks(pid) + "\n")
    with contextlib.suppress(OSError, trust.Untrusted):
        run_history.append(log_dir, f"task-{rank}", run_history.HANG, run, now, rank=rank,
                           node=node, progressed=round(mine, 3), stacks=path)  # fmt: skip
    return path


def start(env: Mapping[str, str], rank: int | None, pid: int, say: Callable[[str], None]) -> threading.Event | None:
    """Watch in a daemon thread while the program runs; set the returned event to stop watching."""
    raw = env.get(contract.HANG_TIMEOUT, "")
    log_dir = env.get(contract.LOG_DIR)
    if not raw.isdigit() or int(raw) == 0 or not log_dir or rank is None:
        return None
    timeout, started, stop = float(raw), time.time(), threading.Event()
    run = restart_count_from(env) + 1  # read once, at the start of the watch

    def watch() -> None:
        while not stop.wait(poll_interval(timeout)):
            now = time.time()
            newest = last_progress(log_dir, started)
            limit = timeout if newest > started else START_FACTOR * timeout  # start-up: no rank progressed yet
            if now - newest < limit:
                continue
            path = on_hang(env, rank, pid, started, now, run)
            # Every rank's stacks before any program dies: a killed rank ends the step (--kill-on-bad-exit), which
            # would stop the others' supervisors before their own dump. They all see the same files, so they all
            # find the hang within one poll interval.
            world = env.get("WORLD_SIZE", "")
            deadline = time.monotonic() + 2 * poll_interval(timeout) + DUMP_TIMEOUT
            while world.isdigit() and dumped_since(log_dir, now - 2 * poll_interval(timeout)) < int(world):
                if time.monotonic() > deadline or stop.wait(0.2):
                    break
            say(f"no progress on any rank for {timeout:.0f} s (recovery.hang_timeout): stacks in {path}; "
                "ending the program so the step restarts")  # fmt: skip
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return

    threading.Thread(target=watch, name="slurmgen-hang-watchdog", daemon=True).start()
    return stop


def nccl_trace_env(env: Mapping[str, str]) -> dict[str, str]:
    """On GPUs with the watchdog on: torch's NCCL flight recorder (a ring of the last collectives) and its dump when
    a collective times out, into the job's hang directory, one file per rank
    (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp reads these variables). The user's own settings win."""
    gpus, log_dir = env.get(contract.GPUS_PER_NODE, "0"), env.get(contract.LOG_DIR)
    if not gpus.isdigit() or int(gpus) == 0 or not log_dir or env.get(contract.HANG_TIMEOUT, "0") in ("", "0"):
        return {}
    wanted = {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": NCCL_TRACE_ENTRIES,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(log_dir, HANG_DIR, "nccl-trace-rank-"),
    }
    return {name: value for name, value in wanted.items() if name not in env}
