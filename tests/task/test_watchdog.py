"""The hang watchdog's parts on plain files (task/watchdog.py, batch/restart.py); whole runs with a
hung rank: tests/local/test_local_recovery.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest

from slurmgen import contract, run_history, stack_dump
from slurmgen.batch import restart as batch_restart
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import expected_node_dir
from slurmgen.task import watchdog

PY_SPY_DUMP = """rank 1 on n1, pid 42: no progress on any rank for 20 s; this rank last progressed at 12:00:00
Process 42: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 43 (idle): "pt_autograd_0"
    wait (threading.py:327)
Thread 42 (idle): "MainThread"
    stuck_in_data_loader (train.py:12)
    main (train.py:30)
"""


def test_the_function_a_rank_hangs_in_is_the_main_threads_innermost(tmp_path: Path) -> None:
    stacks = tmp_path / "rank-1.stacks"
    stacks.write_text(PY_SPY_DUMP)
    assert batch_restart.hung_in(str(stacks)) == "stuck_in_data_loader"
    assert batch_restart.hung_in(str(tmp_path / "missing")) == ""


def test_without_py_spy_the_function_is_the_programs_own_dumps_innermost(tmp_path: Path) -> None:
    stacks = tmp_path / "rank-0.stacks"
    stacks.write_text(
        "rank 0 on n1, pid 42: no progress on any rank for 2 s; this rank last progressed at 12:00:00\n"
        + watchdog.OWN_HEAD
        + 'Thread 0x00007f8b833e76c0 (most recent call first):\n  File "<string>", line 8 in helper_thread_sleeps\n\n'
        + 'Current thread 0x00007f8b84229b80 (most recent call first):\n  File "train.py", line 6 in waits_in_a_lock\n'
        + '  File "train.py", line 11 in <module>\n(py-spy is not installed ...)\n'
    )
    assert batch_restart.hung_in(str(stacks)) == "waits_in_a_lock"


def test_progress_is_the_newest_rank_output_or_mark_of_the_node_and_never_before_the_start(tmp_path: Path) -> None:
    """Both kinds of progress live in the node's own directory (task/node_watch.py): out-<rank> (output grew) and
    rank-<rank> (the progress mark)."""
    import shutil

    from slurmgen.progress_mark import node_dir, write_node_file
    from slurmgen.task.node_watch import newest_in

    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "60", "SLURMD_NODENAME": "n1"}
    folder = node_dir(JobContext.from_environ(env))
    try:
        write_node_file(os.path.join(folder, "out-0"), "")
        write_node_file(os.path.join(folder, "rank-1"), "3\n")
        os.utime(os.path.join(folder, "out-0"), (1000.0, 1000.0))
        os.utime(os.path.join(folder, "rank-1"), (2000.0, 2000.0))
        assert newest_in(folder, ("rank-", "out-"), 500.0) == 2000.0
        assert newest_in(folder, ("rank-", "out-"), 3000.0) == 3000.0
        assert watchdog.own_progress(JobContext.from_environ(env), 0, 500.0) == 1000.0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_per_step_mark_is_touched_at_most_once_a_second(tmp_path: Path) -> None:
    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "60"}
    mark = watchdog.ProgressMark(JobContext.from_environ(env), 3)
    mark.touch()
    path = Path(watchdog.progress_path(str(tmp_path), 3))
    first = path.stat().st_mtime_ns
    os.utime(path, ns=(first - 10**9, first - 10**9))
    mark.touch()  # within the second: no write
    assert path.stat().st_mtime_ns == first - 10**9
    assert (
        watchdog.ProgressMark(JobContext.from_environ({**env, contract.HANG_TIMEOUT: "0"}), 3).path is None
    )  # watchdog off: no marks
    shutil.rmtree(expected_node_dir(JobContext.from_environ(env)), ignore_errors=True)  # the node mark's, ours


def test_the_nccl_flight_recorder_only_on_gpus_and_never_over_the_users_own(tmp_path: Path) -> None:
    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "60", contract.GPUS_PER_NODE: "8"}
    got = watchdog.nccl_trace_env(JobContext.from_environ(env))
    assert got["TORCH_NCCL_TRACE_BUFFER_SIZE"] == watchdog.NCCL_TRACE_ENTRIES
    assert got["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "hang" / "nccl-trace-rank-")
    assert watchdog.nccl_trace_env(JobContext.from_environ({**env, contract.GPUS_PER_NODE: "0"})) == {}
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in watchdog.nccl_trace_env(
        JobContext.from_environ({**env, "TORCH_NCCL_TRACE_BUFFER_SIZE": "9"})
    )


def program_gone(pid: int) -> bool:
    """``pid`` has ended: no such process, or a zombie (proc(5): state Z)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_the_watchdog_dumps_a_stopped_program_below_a_wrapper_and_kills_both(tmp_path: Path) -> None:
    """The supervisor's child is a shell that runs the program (a wrapper); the program prints once, sleeps in a
    named function and is then stopped (SIGSTOP), as `slurmgen run --hang-rank` does. After 2 s without progress
    the stacks file holds py-spy's dump of the program itself (the Python below the shell, read without a suspend),
    names the function, says it is stopped, and the hang event records it; the shell and the program are killed.
    (Before: py-spy was pointed at the wrapper, and on a stopped program it failed to suspend it.)"""
    import shutil
    import signal
    import subprocess
    import sys

    if watchdog.py_spy() is None:
        pytest.skip("py-spy is not installed (pip install 'slurmgen-torch[torch]')")
    from slurmgen import run_history
    from slurmgen.progress_mark import node_dir

    log = tmp_path / "rank-0.log"
    code = "import time\ndef waits_forever():\n    time.sleep(600)\nprint('step', flush=True)\nwaits_forever()\n"
    with open(log, "w") as out:
        shell = subprocess.Popen(["bash", "-c", '"$0" -c "$1"; echo ended', sys.executable, code], stdout=out)
    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "2", "WORLD_SIZE": "1"}
    program = 0
    try:
        while "step" not in log.read_text():
            assert shell.poll() is None, log.read_text()
            time.sleep(0.05)
        program = watchdog.program_pid(shell.pid)
        assert program != shell.pid
        os.kill(program, signal.SIGSTOP)
        said: list[str] = []
        stop = watchdog.start(JobContext.from_environ(env), 0, shell.pid, said.append)
        assert stop is not None
        assert shell.wait(timeout=60) == -9
        stop.set()
        deadline = time.monotonic() + 30  # the program, orphaned by the shell's death, is reaped by init
        while not program_gone(program) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert program_gone(program), "the wrapper's program was left running"
    finally:
        if shell.poll() is None:
            shell.kill()
        if program:
            with contextlib.suppress(ProcessLookupError):
                os.kill(program, signal.SIGKILL)
        shutil.rmtree(node_dir(JobContext.from_environ(env)), ignore_errors=True)  # the node's directory in /dev/shm
    stacks = (tmp_path / "hang" / "rank-0.stacks").read_text()
    assert f"its program (pid {program}) is stopped" in stacks, stacks
    assert f"Process {program}: " in stacks and "waits_forever" in stacks and "py-spy: Error" not in stacks, stacks
    assert batch_restart.hung_in(str(tmp_path / "hang" / "rank-0.stacks")) == "waits_forever"
    [event] = [e for e in run_history.read(str(tmp_path)) if e.get("event") == run_history.HANG]
    assert (event["rank"], event["stopped"], event["waiting"]) == (0, True, False), event
    assert said and "no progress on any rank for 2 s (recovery.hang_timeout)" in said[0]


@pytest.mark.gpu
@pytest.mark.torch
def test_the_nccl_flight_recorder_records_collectives_on_a_gpu(tmp_path: Path) -> None:
    """With the variables the supervisor sets on GPUs, torch's NCCL flight recorder holds the collectives run."""
    import subprocess
    import sys

    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "60", contract.GPUS_PER_NODE: "1"}
    code = (
        "import pickle, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl', init_method='tcp://127.0.0.1:29517', rank=0, world_size=1)\n"
        "t = torch.ones(4, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize()\n"
        "trace = pickle.loads(torch._C._distributed_c10d._dump_nccl_trace())\n"
        "names = [e['profiling_name'] for e in trace['entries']]\n"
        "print(names)\n"
        "print(sum(1 for n in names if 'allreduce' in n.replace('_', '')))\n"  # nccl:all_reduce (torch 2.11+)
        "dist.destroy_process_group()\n"
    )
    trace = watchdog.nccl_trace_env(JobContext.from_environ(env))
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **trace},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 1, done.stdout


def test_the_steps_a_restart_loses_are_the_marks_steps_since_the_last_save_of_that_start(tmp_path: Path) -> None:
    """batch/restart.py steps_lost: rank 0's mark says the step reached; rank 0's newest save event of this
    start of the step says what the restart resumes from; a mark from before this start counts for nothing."""
    from slurmgen import run_history

    log = str(tmp_path)
    env = {contract.LOG_DIR: log, contract.HANG_TIMEOUT: "60"}
    started = time.time() - 1
    assert batch_restart.steps_lost(log, run_history.History([]), 1, started) is None  # no mark: not known
    watchdog.ProgressMark(JobContext.from_environ(env), 0).touch(57)
    save = {"event": run_history.SAVE, "run": 1, "time": started + 0.5, "steps": 40}
    older = {"event": run_history.SAVE, "run": 1, "time": started - 100, "steps": 50}  # an earlier start's save
    assert batch_restart.steps_lost(log, run_history.History([older, save]), 1, started) == 17
    assert (
        batch_restart.steps_lost(log, run_history.History([older]), 1, started) == 57
    )  # no save in this start: all its steps
    assert (
        batch_restart.steps_lost(log, run_history.History([save]), 1, time.time() + 10) is None
    )  # the mark predates this start
    os.remove(watchdog.progress_path(log, 0))
    watchdog.ProgressMark(JobContext.from_environ(env), 2).touch(45)  # rank 0 left no mark: another rank's
    assert batch_restart.steps_lost(log, run_history.History([save]), 1, started) == 5
    assert watchdog.steps_marked(log, 2, started) == 45
    shutil.rmtree(expected_node_dir(JobContext.from_environ(env)), ignore_errors=True)  # the node marks', ours


def test_the_steps_a_hang_restart_loses_reach_to_the_last_sample_when_the_shared_mark_is_older(
    tmp_path: Path,
) -> None:
    """The shared mark is rewritten at most every SHARED_MARK_PERIOD seconds: a program that hung two steps after
    its save left it at its first step. Its supervisor's last sample (what the node mark held at the kill) is in
    the run history and is the step reached: 22 - 19 steps lost, not 0 (what the mark alone gave)."""
    from slurmgen import run_history

    log = str(tmp_path)
    env = {contract.LOG_DIR: log, contract.HANG_TIMEOUT: "60"}
    started = time.time() - 1
    watchdog.ProgressMark(JobContext.from_environ(env), 0).touch(1)  # the shared mark, at the first step
    save = {"event": run_history.SAVE, "run": 1, "time": started + 0.5, "steps": 19}
    last = {"event": run_history.PROGRESS, "run": 1, "time": started + 0.6, "steps": 22, "step": 22, "last": True,
            "from_mark": True}  # fmt: skip
    earlier = {"event": run_history.PROGRESS, "run": 1, "time": started - 50, "steps": 90}  # an earlier start's
    assert batch_restart.steps_lost(log, run_history.History([save, last]), 1, started) == 3
    assert batch_restart.steps_lost(log, run_history.History([earlier, save]), 1, started) == 0
    assert batch_restart.step_reached(run_history.History([save, last]), 1, started) == 22  # the program's own
    assert batch_restart.step_reached(run_history.History([earlier, save]), 1, started) is None
    shutil.rmtree(expected_node_dir(JobContext.from_environ(env)), ignore_errors=True)  # the node marks', ours


def _hang(rank: int, progressed: float, **fields: object) -> dict[str, object]:
    return {"event": "hang", "run": 1, "time": 100.0, "rank": rank, "node": "n1", "progressed": progressed,
            "stacks": f"/logs/hang/rank-{rank}.stacks", **fields}  # fmt: skip


def test_the_hung_rank_is_named_not_the_ranks_waiting_on_it() -> None:
    """A stopped program is the hang even when a waiting rank's progress is older (its marks are a second apart);
    else the rank not waiting in a collective while the others are; else the oldest progress."""
    stopped = [_hang(0, 10.0, stopped=False, waiting=True), _hang(1, 11.0, stopped=True, waiting=True),
               _hang(3, 9.0, stopped=False, waiting=True)]  # fmt: skip
    history = run_history.History(stopped)
    ordered = batch_restart.hang_events(history, 1, 0.0)
    assert [e["rank"] for e in batch_restart.hang_cause(ordered)] == [1]
    assert batch_restart._where(history, 1, 0.0, True, ordered) == {"rank": 1, "node": "n1"}
    in_loader = [_hang(0, 10.0, waiting=True), _hang(2, 10.5, waiting=False), _hang(3, 9.0, waiting=True)]
    assert [e["rank"] for e in batch_restart.hang_cause(batch_restart.hang_events(run_history.History(in_loader),
                                                                                  1, 0.0))] == [2]  # fmt: skip
    all_wait = [_hang(0, 10.0, waiting=True), _hang(1, 10.4, waiting=True), _hang(2, 12.0, waiting=True)]
    assert [e["rank"] for e in batch_restart.hang_cause(batch_restart.hang_events(run_history.History(all_wait),
                                                                                  1, 0.0))] == [0, 1]  # fmt: skip


def test_a_rank_waiting_in_a_collective_is_told_from_either_dump() -> None:
    spy = (
        "Process 7: python train.py\nPython v3.11.7\n\nThread 9 (idle)\n    wait (threading.py:327)\n"
        "Thread 7 (idle)\n    all_reduce (torch/distributed/distributed_c10d.py:3252)\n    main (train.py:3)\n"
    )
    assert stack_dump.waits_on_peers(spy) and stack_dump.innermost_function(spy) == "all_reduce"
    own = ('Current thread 0x00007f (most recent call first):\n  File "/v/torch/distributed/distributed_c10d.py", '
           'line 3252 in all_reduce\n  File "train.py", line 3 in main\n')  # fmt: skip
    assert stack_dump.waits_on_peers(own)
    assert not stack_dump.waits_on_peers(PY_SPY_DUMP) and not stack_dump.waits_on_peers("")


def test_a_stopped_watch_writes_nothing_more_in_the_nodes_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor stops its watch before its task leaves the node, and the stop waits for the poll under way: a
    poll that ended after the node's last task had removed the directory wrote its notes there (the node's lead,
    the program's output growth) and so made the directory again, which stayed in /dev/shm after the job (the
    leaves were counted already). Each poll is made slow here, so that the stop comes in the middle of one."""
    import shutil
    import threading

    from slurmgen.progress_mark import node_dir
    from slurmgen.task.node_watch import NodeWatch

    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "2", "WORLD_SIZE": "1"}
    job = JobContext.from_environ(env)
    polling = threading.Event()
    poll = NodeWatch.newest

    def slow_poll(self: NodeWatch, now: float) -> tuple[float, bool]:
        polling.set()
        time.sleep(0.5)
        return poll(self, now)

    monkeypatch.setattr(NodeWatch, "newest", slow_poll)
    try:
        watch = watchdog.start(job, 0, os.getpid(), lambda line: None)
        assert watch is not None
        assert polling.wait(10)
        watch.set()
        shutil.rmtree(node_dir(job))
        time.sleep(1.0)
        assert not os.path.exists(node_dir(job))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(node_dir(job))
