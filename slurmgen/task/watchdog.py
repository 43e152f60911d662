"""The hang watchdog, run by each task's supervisor (the program's parent) beside the program.

Progress is the newest of: any rank's output growing (everything a program prints goes to its rank log, so a
program that never imports slurmgen makes progress by printing: handler `requeue` or `program`), and any rank's
progress mark, which slurmgen's per-step `Preemption.should_stop()` touches at most ten times a second. Both are kept
in the node's own directory (/dev/shm), and nodes agree through one shared heartbeat file that each node writes at
most once every 10 s (task/node_watch.py): what a supervisor does per poll does not grow with the ranks on other
nodes, and the shared file system sees at most one operation per node per 10 s (bench/scale.py). Until the first
progress of any rank in this start of the step the limit is START_FACTOR
hang timeouts (importing torch and loading a model on a busy node can take longer than a hang timeout short enough
to be useful); after it, when no rank has progressed for recovery.hang_timeout seconds, each supervisor:
- writes its program's Python stacks, every thread, into `<log dir>/hang/rank-<N>.stacks`, headed by the rank,
  the node and when the rank last progressed. A Python program writes its own first: faulthandler, registered on
  a signal by slurmgen's start-up hook (slurmgen.task.program_stacks), answers from C inside a sleep, a lock or a
  collective and needs no extra install. py-spy, where installed, reads them from outside too (`py-spy dump
  --pid`), which also works for a program that never loads the hook (-E/-I/-S) and for one that is stopped. It
  reads the program's Python process: the supervisor's child, or, when that is a wrapper (a shell, `env`, a
  container's runtime), the topmost Python process below it (`program_pid`). A stopped program (SIGSTOP: state T)
  is read without being suspended (`--nonblocking`): py-spy's own suspend is a ptrace interrupt, and the
  group-stop it meets instead fails the dump ("unexpected waitpid result"). py-spy is the supervisor's child, the
  program's sibling, which Yama's ptrace_scope=1 (Documentation/admin-guide/LSM/Yama.rst) refuses unless the
  program names a tracer: the program's process declares its supervisor (prctl PR_SET_PTRACER, before exec),
  and Yama lets the declared tracer's descendants attach (security/yama/yama_lsm.c, ptracer_exception_found);
- records a `hang` event (rank, node, last progress, whether the program was stopped and whether it was
  waiting on its peers in torch.distributed) in the run history, from which the batch shell names the rank that
  hung, not the ranks waiting on it (batch/restart.py);
- waits (bounded) until every rank of every node has written its stacks, then kills the program (SIGKILL): the
  step ends, and the batch shell restarts it inside the allocation.

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
import sys
import threading
import time
from collections.abc import Callable, Mapping

from slurmgen import trust
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import (
    NODE_DIRS,
    PROGRESS_DIR,
    ProgressMark,
    expected_node_dir,
    node_dir,
    node_marks,
    own_node_dir,
    planted,
    progress_path,
    steps_marked,
    write_node_file,
)
from slurmgen.stack_dump import waits_on_peers
from slurmgen.task.node_watch import START_FACTOR, NodeWatch, count_since, local_ranks, poll_interval
from slurmgen.task.program_stacks import is_stopped

__all__ = [
    "PROGRESS_DIR",
    "START_FACTOR",
    "ProgressMark",
    "poll_interval",
    "progress_path",
    "steps_marked",
]  # for their readers

HANG_DIR = "hang"
DUMP_TIMEOUT = 30.0  # seconds for one py-spy dump
NCCL_TRACE_ENTRIES = "2000"


def own_progress(source: JobContext, rank: int, since: float) -> float:
    """This rank's newest progress: its mark or its output growth, both in the node's directory."""
    times = [since]
    for name in (f"rank-{rank}", f"out-{rank}"):
        with contextlib.suppress(OSError):
            times.append(os.stat(os.path.join(node_dir(source), name)).st_mtime)
    return max(times)


PY_SPY_MISSING = "py-spy is not installed for this Python (pip install 'slurmgen-torch[torch]' brings it)"
OWN_HEAD = "Python stacks written by the program itself (faulthandler; every thread, most recent call first):\n"


def py_spy() -> str | None:
    # Installed with slurmgen-torch[torch] next to this interpreter; a job's PATH need not include a virtualenv's bin/.
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


def program_stacks(pid: int, own: Callable[[], str] | None, stopped: bool = False) -> str:
    """The program's stacks: its own faulthandler dump (``own``, when its start-up hook registered one) and py-spy's,
    each where available, or why there are none. ``stopped``: the program cannot run (it is read without a suspend)."""
    mine = own() if own is not None else ""
    if py_spy() is None:
        if mine:
            return OWN_HEAD + mine + f"({PY_SPY_MISSING}: no py-spy dump)\n"
        why = "it is stopped" if stopped else ("it is not a Python started through slurmgen's start-up hook, or it "
                                               "did not answer")  # fmt: skip
        return f"{PY_SPY_MISSING}, and the program wrote no stacks of its own ({why}): no stacks\n"
    return (OWN_HEAD + mine + "\npy-spy dump:\n" if mine else "") + dump_stacks(pid, stopped)


def dump_stacks(pid: int, stopped: bool = False) -> str:
    """Every thread's Python stack of ``pid`` by py-spy, or why there are none. A stopped ``pid`` is read as it
    is (--nonblocking): py-spy cannot suspend a process in a group-stop."""
    tool = py_spy()
    if tool is None:
        return f"{PY_SPY_MISSING}: no stacks\n"
    import subprocess  # only at a hang: not part of every supervisor's start (bench/startup.py)

    argv = [tool, "dump", "--pid", str(pid), *(["--nonblocking"] if stopped else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=DUMP_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"py-spy dump failed: {exc}\n"
    return done.stdout + (f"py-spy: {done.stderr.strip()}\n" if done.returncode else "")


def _children() -> dict[int, list[int]]:
    """Every process's children, from each one's parent in /proc/<pid>/stat (proc(5)): one pass over /proc."""
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as handle:
                parent = int(handle.read().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(parent, []).append(int(name))
    return {parent: sorted(kids) for parent, kids in found.items()}


def is_python(pid: int) -> bool:
    """Whether ``pid`` runs a CPython: its executable is named python* or it maps a libpython (proc(5): exe, maps)."""
    with contextlib.suppress(OSError):
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("python"):
            return True
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as handle:
            return any("/libpython" in line for line in handle)
    except OSError:
        return False


def program_pid(pid: int, depth: int = 8) -> int:
    """The program's Python process: ``pid`` itself, or, when it is a wrapper (a shell, `env`, a container's
    runtime), the first Python process below it, breadth first; ``pid`` when there is none."""
    level = [pid]
    children: dict[int, list[int]] | None = None  # read once, and only when pid itself is no Python
    for _ in range(depth):
        for candidate in level:
            if is_python(candidate):
                return candidate
        children = _children() if children is None else children
        level = [child for parent in level for child in children.get(parent, [])]
        if not level:
            break
    return pid


def on_hang(
    job: JobContext, log_dir: str, rank: int, pid: int, newest: float, now: float,
    own: Callable[[], str] | None = None, target: int | None = None,
) -> str:  # fmt: skip
    """Write the stacks and the hang event; returns the stacks file. ``target``: the program's Python process
    (program_pid), ``pid`` itself by default."""
    node = job.node_name or socket.gethostname()
    mine = own_progress(job, rank, min(newest, now))
    folder = os.path.join(log_dir, HANG_DIR)
    trust.own_dir(folder)
    path = os.path.join(folder, f"rank-{rank}.stacks")
    head = (f"rank {rank} on {node}, pid {pid}: no progress on any rank for {now - newest:.0f}"
            f" s; this rank last progressed at {time.strftime('%H:%M:%S', time.localtime(mine))}\n")  # fmt: skip
    target = pid if target is None else target
    stopped = is_stopped(target)
    if target != pid:
        head += f"the program's Python process is pid {target}, below pid {pid}\n"
    if stopped:
        head += f"its program (pid {target}) is stopped (SIGSTOP or a debugger): it cannot run, so it is the hang\n"
    stacks = program_stacks(target, own, stopped)  # before the file exists: other ranks count the files as dumps done
    with os.fdopen(trust.open_write(path, mode=0o644), "a", encoding="utf-8") as out:  # never through a link
        out.write(head + stacks + "\n")
    from slurmgen import run_history  # only at a hang, like subprocess above

    with contextlib.suppress(OSError, trust.Untrusted):
        # One history file per node, not per rank: the batch shell reads one file per node (run_history.py).
        run_history.append(log_dir, f"node-{node}", run_history.HANG, job.run, now, rank=rank, node=node,
                           progressed=round(mine, 3), stacks=path, stopped=stopped,
                           waiting=waits_on_peers(stacks))  # fmt: skip
    return path


def watches(job: JobContext, rank: int | None) -> bool:
    """Whether this task runs the watchdog: a hang timeout, a log directory and a rank."""
    return job.hang_timeout is not None and bool(job.log_dir) and rank is not None


def start(
    job: JobContext, rank: int | None, pid: int, say: Callable[[str], None],
    own: Callable[[], str] | None = None,
) -> Watching | None:  # fmt: skip
    """Watch in a daemon thread while the program runs; set() the returned watch to stop it. ``own`` asks the
    program for its own stacks (slurmgen.task.program_stacks), where its start-up hook registered them."""
    log_dir = job.log_dir
    if job.hang_timeout is None or not log_dir or rank is None:
        return None
    try:
        folder = own_node_dir(job)  # before anything in it is read: another user may have made it first
        if folder != (expected := expected_node_dir(job)):
            say(f"{expected} is not used ({planted(expected)}): this node's directory for the job is {folder} "
                f"(recorded in {os.path.join(log_dir, NODE_DIRS)})")  # fmt: skip
    except trust.Untrusted as exc:
        say(f"{exc}; the hang watchdog is off on this node")
        return None
    except OSError:
        pass  # no directory: no progress is read from it, as before
    timeout, started, stop = float(job.hang_timeout), time.time(), threading.Event()
    view = NodeWatch(job, rank, pid, started, timeout)  # now: what the program has written so far is no progress

    def watch() -> None:
        while not stop.wait(poll_interval(timeout)):
            now = time.time()
            newest, called = view.newest(now)
            if not called:
                continue
            target = program_pid(pid)
            path = on_hang(job, log_dir, rank, pid, newest, now, own, target)
            view.note_dumped()
            # Every rank's stacks before any program dies: a killed rank ends the step (--kill-on-bad-exit), which
            # would stop the others' supervisors before their own dump. Every node reads the same heartbeat, so
            # they all call the hang within about a poll of each other (task/node_watch.py).
            deadline = time.monotonic() + 4 * poll_interval(timeout) + view.period + DUMP_TIMEOUT
            view.wait_all_dumped(deadline, stop.wait)
            say(f"no progress on any rank for {timeout:.0f} s (recovery.hang_timeout): stacks in {path}; "
                "ending the program so the step restarts")  # fmt: skip
            for victim in {pid, target}:  # a wrapper's program too: killing a shell leaves its child running
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            return

    thread = threading.Thread(target=watch, name="slurmgen-hang-watchdog", daemon=True)
    thread.start()
    return Watching(stop, thread)


STOP_WAIT = 2.0  # seconds for the watch's poll under way to end once it is told to stop


class Watching:
    """A running watch. ``set()`` stops it and waits for the poll under way (STOP_WAIT at most): a poll notes the
    program's output growth in the node's directory (`out-<rank>`), and one that came after the node's last task
    removed the directory made it again, which no later leave removed (leave_node counts the tasks that left)."""

    def __init__(self, stop: threading.Event, thread: threading.Thread) -> None:
        self._stop, self._thread = stop, thread

    def set(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(STOP_WAIT)


def leave_node(job: JobContext, rank: int | None, since: float) -> None:
    """This task's program has ended (its supervisor calls this last): note it in the node's directory, and the
    last of the node's tasks to leave removes the directory. Only evidence deletes: the directory must be this
    user's own (lstat: a link or another user's is never touched), and every rank of the node (local_ranks) must
    have left this start of the step; a count that falls short keeps the directory. A restart of the step makes
    it again. Also without the watchdog, since the ranks keep their marks there all the same
    (progress_mark.node_marks).

    Which notes are this start's: in a Slurm step, those that name its start (start_of_step), so a short task that
    ended before its sibling's supervisor even began still counts; outside one, those made since ``since``, when
    this supervisor started (a note of an earlier start is older)."""
    if rank is None or not (watches(job, rank) or node_marks(job)):
        return
    folder = node_dir(job)
    start = start_of_step(job)
    with contextlib.suppress(OSError):
        if trust.breach(folder, os.lstat(folder), directory=True) is not None:
            return
        write_node_file(os.path.join(folder, f"{LEFT}{rank}"), start)
        left = count_naming(folder, start) if start else count_since(folder, LEFT, since)
        if left >= local_ranks(job):
            shutil.rmtree(folder)


LEFT = "left-"  # a task's note in its node's directory that its program ended: left-<rank>, naming its start


def start_of_step(job: JobContext) -> str:
    """This start of the program, the same in every task of it: the run (a requeue's is the next), the Slurm step
    (each srun of a restart inside the allocation makes a new one: SLURM_STEP_ID) and torchrun's restart of its
    workers; "" outside a Slurm step."""
    if job.step_id is None:
        return ""
    return f"{job.run}.{job.step_id}.{job.elastic_restart_count}"


def count_naming(folder: str, start: str) -> int:
    """The leave notes in ``folder`` (a directory the caller found to be the user's own) that name ``start``. A note
    is read by the read rule of every file of the node's directory (trust.read_bytes: a regular file of this user's,
    not a link, not a FIFO); one that fails it counts for nothing, so the directory stays."""
    found = 0
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(LEFT):
                with contextlib.suppress(OSError, trust.Untrusted):
                    found += trust.read_bytes(entry.path, "read", dir_checked=True) == start.encode()
    return found


def nccl_trace_env(job: JobContext, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """On GPUs with the watchdog on: torch's NCCL flight recorder (a ring of the last collectives) and its dump when
    a collective times out, into the job's hang directory, one file per rank
    (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp reads these variables). The user's own settings (in ``env``,
    the program's environment; the job's by default) win."""
    env = job.environ if env is None else env
    log_dir = job.log_dir
    if not job.gpus_per_node or not log_dir or job.hang_timeout is None:
        return {}
    wanted = {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": NCCL_TRACE_ENTRIES,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(log_dir, HANG_DIR, "nccl-trace-rank-"),
    }
    return {name: value for name, value in wanted.items() if name not in env}
