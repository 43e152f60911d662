"""The hang watchdog's parts on plain files (task/watchdog.py, batch/restart.py); whole runs with a
hung rank: tests/local/test_local_recovery.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.batch import restart as batch_restart
from slurmgen.job_context.context import JobContext
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


def test_the_nccl_flight_recorder_only_on_gpus_and_never_over_the_users_own(tmp_path: Path) -> None:
    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "60", contract.GPUS_PER_NODE: "8"}
    got = watchdog.nccl_trace_env(JobContext.from_environ(env))
    assert got["TORCH_NCCL_TRACE_BUFFER_SIZE"] == watchdog.NCCL_TRACE_ENTRIES
    assert got["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / "hang" / "nccl-trace-rank-")
    assert watchdog.nccl_trace_env(JobContext.from_environ({**env, contract.GPUS_PER_NODE: "0"})) == {}
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in watchdog.nccl_trace_env(
        JobContext.from_environ({**env, "TORCH_NCCL_TRACE_BUFFER_SIZE": "9"})
    )


def test_the_watchdog_dumps_a_real_programs_stacks_and_kills_it(tmp_path: Path) -> None:
    """A real child that prints once then sleeps in a named function: after 2 s without progress its stacks name
    the function and it is killed."""
    import shutil
    import subprocess
    import sys

    if shutil.which("py-spy") is None:
        pytest.skip("py-spy is not installed (pip install 'slurmgen-torch[torch]')")
    log = tmp_path / "rank-0.log"
    code = "import time\ndef waits_forever():\n    time.sleep(600)\nprint('step', flush=True)\nwaits_forever()\n"
    with open(log, "w") as out:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=out)
    env = {contract.LOG_DIR: str(tmp_path), contract.HANG_TIMEOUT: "2", "WORLD_SIZE": "1"}
    said: list[str] = []
    stop = watchdog.start(JobContext.from_environ(env), 0, child.pid, said.append)
    assert stop is not None
    try:
        assert child.wait(timeout=60) == -9
    finally:
        stop.set()
        if child.poll() is None:
            child.kill()
        from slurmgen.progress_mark import node_dir

        shutil.rmtree(
            node_dir(JobContext.from_environ(env)), ignore_errors=True
        )  # the node's progress directory in /dev/shm
    stacks = (tmp_path / "hang" / "rank-0.stacks").read_text()
    assert "waits_forever" in stacks, stacks
    assert said and "no progress on any rank for 2 s (recovery.hang_timeout)" in said[0]
    assert time.time() - log.stat().st_mtime >= 2


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
