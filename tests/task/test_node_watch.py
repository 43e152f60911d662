"""The watchdog's view of progress at scale (task/node_watch.py): per-rank chatter in the node's own directory,
one shared heartbeat across nodes; what one poll costs does not grow with the ranks on other nodes."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import node_dir, node_mark_path, write_node_file
from slurmgen.task.node_watch import NodeWatch, poll_interval

NO_PID = 0  # /proc/0 does not exist: no program output to read


@pytest.fixture
def node_dirs() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def node_env(log: Path, node: str, local_id: int = 0, **extra: str) -> dict[str, str]:
    return {contract.LOG_DIR: str(log), contract.HANG_TIMEOUT: "20", "SLURMD_NODENAME": node,
            "SLURM_LOCALID": str(local_id), "SLURM_PROCID": str(local_id), "SLURM_NTASKS": "4096", **extra}  # fmt: skip


def mark(env: dict[str, str], rank: int, when: float, made: list[str]) -> None:
    path = node_mark_path(JobContext.from_environ(env), rank)
    write_node_file(path, "5\n")
    os.utime(path, (when, when))
    made.append(node_dir(JobContext.from_environ(env)))


def test_a_node_that_waits_calls_no_hang_while_another_node_progresses(tmp_path: Path, node_dirs: list[str]) -> None:
    """Node a progresses, node b's ranks wait (a barrier): b hears a through the heartbeat and calls no hang; once a
    stops too, both call it, no later than the hang timeout plus the heartbeat's lag, within a poll of each other."""
    t0, timeout = time.time(), 20.0
    started = t0 - 100
    a, b = node_env(tmp_path, "a"), node_env(tmp_path, "b")
    node_dirs.extend([node_dir(JobContext.from_environ(a)), node_dir(JobContext.from_environ(b))])
    mark(a, 0, t0, node_dirs)
    watch_a = NodeWatch(JobContext.from_environ(a), 0, NO_PID, started, timeout)
    watch_b = NodeWatch(JobContext.from_environ(b), 8, NO_PID, started, timeout)
    lag = 2 * poll_interval(timeout)
    newest_a, called_a = watch_a.newest(t0 + 1)  # a publishes its progress
    newest_b, called_b = watch_b.newest(t0 + 1)  # b, idle for 101 s, hears a
    assert abs(newest_a - t0) < 0.01 and abs(newest_b - t0) < 0.01 and not called_a and not called_b
    assert not watch_b.newest(t0 + timeout + lag - 0.5)[1]
    assert not watch_a.newest(t0 + timeout + lag - 0.5)[1]
    assert watch_b.newest(t0 + timeout + lag + 0.1)[1]
    assert watch_a.newest(t0 + timeout + lag + 0.1)[1]


def test_the_other_supervisors_of_a_node_follow_its_leader(tmp_path: Path, node_dirs: list[str]) -> None:
    t0 = time.time()
    lead, other = node_env(tmp_path, "a"), node_env(tmp_path, "a", local_id=1)
    mark(lead, 0, t0 - 200, node_dirs)
    follower = NodeWatch(JobContext.from_environ(other), 1, NO_PID, t0 - 300, 20.0)
    leader = NodeWatch(JobContext.from_environ(lead), 0, NO_PID, t0 - 300, 20.0)
    assert leader.newest(t0)[1]  # its leader writes 'lead' and 'hang' in the node's directory
    assert follower.newest(t0 + 0.1)[1]
    assert not NodeWatch(JobContext.from_environ(other), 1, NO_PID, t0 + 1, 20.0).newest(t0 + 2)[
        1
    ]  # a later start: that hang is old


def test_a_rank_that_prints_makes_progress_without_its_log_being_read(tmp_path: Path, node_dirs: list[str]) -> None:
    """The program's output offset (from /proc) grew: its supervisor touches out-<rank> in the node's directory."""
    import subprocess

    env = node_env(tmp_path, "a")
    node_dirs.append(node_dir(JobContext.from_environ(env)))
    log = open(tmp_path / "rank-0.log", "a")  # noqa: SIM115
    child = subprocess.Popen([sys.executable, "-c", "import time\nprint('x', flush=True)\ntime.sleep(0.5)\n"
                              "print('y', flush=True)\ntime.sleep(30)"], stdout=log)  # fmt: skip
    try:
        watch = NodeWatch(JobContext.from_environ(env), 0, child.pid, time.time() - 1, 20.0)
        deadline = time.time() + 20
        while watch.offset is None or watch.offset < 4:  # 'x\ny\n'
            assert time.time() < deadline
            watch.newest(time.time())
            time.sleep(0.1)
        assert os.path.exists(os.path.join(node_dir(JobContext.from_environ(env)), "out-0"))
    finally:
        child.kill()
        child.wait()
        log.close()


def ops_of_one_poll(log: Path, other_nodes: int, made: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file operations (opens, directory reads, stats) of two polls of node 'me', whose ranks are idle (so it
    reads the heartbeat), in a job with ``other_nodes`` nodes of 8 ranks beside it, each with its files."""
    now = time.time()
    (log / "progress").mkdir(exist_ok=True)
    for node in range(other_nodes):
        env = node_env(log, f"n{node}")
        for local in range(8):
            rank = 8 + 8 * node + local
            (log / f"rank-{rank}.log").write_text("step\n")
            (log / "progress" / f"rank-{rank}").write_text("5\n")
            mark(env, rank, now - 1, made)
    me = node_env(log, "me")
    mine = node_dir(JobContext.from_environ(me))
    made.append(mine)
    mark(me, 0, now - 100, made)
    watch = NodeWatch(JobContext.from_environ(me), 0, NO_PID, now - 200, 20.0)
    seen: list[str] = []
    recording = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if recording[0] and event in ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.utime"):
            seen.append(f"{event} {str(args[0]).replace(str(log), '<log>').replace(mine, '<node>')}")

    sys.addaudithook(hook)  # a hook cannot be removed: it records only while recording[0]
    real_stat = os.stat

    def counting_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if recording[0]:
            seen.append(f"stat {str(path).replace(str(log), '<log>').replace(mine, '<node>')}")
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", counting_stat)
    try:
        watch.newest(now)
        watch.newest(now + poll_interval(20.0))
    finally:
        recording[0] = False
        monkeypatch.undo()
    return seen


def test_a_watchdogs_file_operations_per_poll_do_not_grow_with_the_ranks_on_other_nodes(
    tmp_path: Path, node_dirs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    few = ops_of_one_poll(small, 1, node_dirs, monkeypatch)
    many = ops_of_one_poll(large, 64, node_dirs, monkeypatch)
    assert few == many, (few, many)
    shared = [op for op in many if "<log>" in op]
    # An idle node reads the one shared heartbeat (once a period, and fresh before it calls a hang); no scan.
    assert set(shared) == {"open <log>/progress/heartbeat"} and len(shared) <= 2, many
    assert not any("<node>" not in op and "<log>" not in op and "/proc/" not in op for op in many), many
