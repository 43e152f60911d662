"""One parse of each fact the three in-job processes share: the hang watchdog on or off, the ranks, the run number.

Each fact is a table over the values an environment can hold; where several pieces of the task act on one fact (the
watchdog, the progress marks, the NCCL flight recorder), they are asked together and must agree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.progress_mark import ProgressMark
from slurmgen.task import watchdog

# SLURMGEN_HANG_TIMEOUT -> the watchdog's timeout (None: off). Empty is off, as unset: the renderer exports a whole
# number of seconds or nothing, so anything else is off too rather than an error in every task.
HANG = [
    (None, None),
    ("", None),
    (" ", None),
    ("0", None),
    ("00", None),
    ("abc", None),
    ("-5", None),
    ("1.5", None),
    ("30", 30),
    (" 30 ", 30),
]


@pytest.mark.parametrize(("raw", "timeout"), HANG)
def test_the_hang_timeout_is_parsed_once(raw: str | None, timeout: int | None) -> None:
    env = {} if raw is None else {contract.HANG_TIMEOUT: raw}
    assert JobContext.from_environ(env).hang_timeout == timeout


@pytest.mark.parametrize(("raw", "timeout"), HANG)
def test_watchdog_progress_marks_and_flight_recorder_agree_on_or_off(
    raw: str | None, timeout: int | None, tmp_path: Path
) -> None:
    env = {contract.LOG_DIR: str(tmp_path), contract.GPUS_PER_NODE: "1"}
    if raw is not None:
        env[contract.HANG_TIMEOUT] = raw
    job = JobContext.from_environ(env)
    stop = watchdog.start(job, 0, os.getpid(), lambda line: None)
    try:
        on = {
            "watchdog": stop is not None,
            "progress mark": ProgressMark(job, 0).path is not None,
            "flight recorder": watchdog.nccl_trace_env(job) != {},
        }
    finally:
        if stop is not None:
            stop.set()
        watchdog.leave_node(job, 0, 0.0)  # the node's only task leaves: its /dev/shm directory goes
    assert on == dict.fromkeys(on, timeout is not None)


UNDER_TORCHRUN = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}
RANKS = [
    # torchrun's variables first: inside `srun ... torchrun`, SLURM_PROCID is the node's index, not the rank
    (UNDER_TORCHRUN, (5, 1, 8, "torchrun")),
    ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"}, (3, 1, 4, "slurm")),
    ({}, (0, 0, 1, "single")),
    ({"SLURM_PROCID": "3"}, (0, 0, 1, "single")),  # no world size: not a step of several tasks
]


@pytest.mark.parametrize(("env", "want"), RANKS)
def test_the_ranks_come_from_torchrun_then_slurm_else_a_single_process(
    env: dict[str, str], want: tuple[int, int, int, str]
) -> None:
    ranks = JobContext.from_environ(env).ranks
    assert (ranks.rank, ranks.local_rank, ranks.world_size, ranks.source) == want


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({"RANK": "2", "WORLD_SIZE": "4", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 2),
        ({"RANK": "3"}, 3),  # a lone RANK (a program started by hand): its rank, not an error
        ({"SLURM_PROCID": "1"}, 1),
        ({"RANK": "x"}, 0),
        ({}, 0),
    ],
)
def test_the_rank_for_a_rank_zero_question_never_fails(env: dict[str, str], rank: int) -> None:
    assert JobContext.from_environ(env).rank == rank


def test_an_inconsistent_pair_is_an_error_only_for_who_asks_for_the_world() -> None:
    job = JobContext.from_environ({"RANK": "1", "SLURM_JOB_ID": "7"})  # built fine: the batch shell never asks
    with pytest.raises(RuntimeSetupError, match="WORLD_SIZE"):
        _ = job.ranks


@pytest.mark.parametrize(("raw", "run"), [(None, 1), ("", 1), ("0", 1), ("2", 3), (" 4 ", 5)])
def test_the_run_number_is_the_restart_count_plus_one_unset_is_the_first(raw: str | None, run: int) -> None:
    env = {"SLURM_JOB_ID": "7"} if raw is None else {"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": raw}
    assert JobContext.from_environ(env).run == run
