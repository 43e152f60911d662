"""Rank discovery and job identity on plain mappings: every launcher combination."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from slurmgen import contract
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.public import get_distrib_size, is_rank_zero, is_slurm_batch_job, job_key, restart_count
from slurmgen.job_context.ranks import parse_tasks_per_node, read_ranks
from slurmgen.task.signal_block import block_preemption_signal, parse_signal_name, preemption_signal

# Task 5 of a 2-node x 4-task srun step (node 1).
SRUN = {
    "SLURM_JOB_ID": "77",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_NODEID": "1",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURM_TASKS_PER_NODE": "4(x2)",
}
# torchrun (one agent per node, SLURM_PROCID is the node index) worker 6 of 8, local rank 2.
TORCHRUN_IN_SLURM = {
    "SLURM_JOB_ID": "77",
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "0",
    "SLURM_NTASKS": "2",
    "SLURM_NODEID": "1",
    "SLURM_TASKS_PER_NODE": "1(x2)",
    "RANK": "6",
    "LOCAL_RANK": "2",
    "WORLD_SIZE": "8",
    "LOCAL_WORLD_SIZE": "4",
}


def test_torchrun_inside_slurm_wins_and_sets_nothing() -> None:
    env = dict(TORCHRUN_IN_SLURM)
    assert get_distrib_size(env) == (2, 6, 8)
    assert env == TORCHRUN_IN_SLURM
    assert read_ranks(env).local_world_size == 4


def test_srun_only_sets_the_standard_variables() -> None:
    env = dict(SRUN)
    assert get_distrib_size(env) == (1, 5, 8)
    assert env["RANK"] == "5"
    assert env["LOCAL_RANK"] == "1"
    assert env["WORLD_SIZE"] == "8"
    assert env["LOCAL_WORLD_SIZE"] == "4"


def test_srun_does_not_override_a_standard_variable_already_set() -> None:
    env = {**SRUN, "LOCAL_WORLD_SIZE": "7"}
    get_distrib_size(env)
    assert env["LOCAL_WORLD_SIZE"] == "7"


def test_nothing_is_a_single_process() -> None:
    env: dict[str, str] = {}
    assert get_distrib_size(env) == (0, 0, 1)
    assert env == {}


def test_uneven_tasks_per_node() -> None:
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    env = {
        "SLURM_PROCID": "6",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "7",
        "SLURM_NODEID": "3",
        "SLURM_TASKS_PER_NODE": "2(x3),1",
    }
    assert read_ranks(env).local_world_size == 1
    env["SLURM_NODEID"] = "0"
    assert read_ranks(env).local_world_size == 2


def test_step_tasks_per_node_beats_the_jobs() -> None:
    env = {**SRUN, "SLURM_STEP_TASKS_PER_NODE": "3,5", "SLURM_TASKS_PER_NODE": "4(x2)"}
    assert read_ranks(env).local_world_size == 5


def test_missing_localid_defaults_to_zero_and_unknown_local_world_is_left_out() -> None:
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    assert get_distrib_size(env) == (0, 0, 1)
    assert "LOCAL_WORLD_SIZE" not in env


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "1"}, "RANK is set but WORLD_SIZE is not"),
        ({"WORLD_SIZE": "4"}, "WORLD_SIZE is set but RANK is not"),
        ({"RANK": "4", "WORLD_SIZE": "4"}, "outside world size"),
        ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK='x' is not an integer"),
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "-1"}, "negative"),
        ({**SRUN, "SLURM_TASKS_PER_NODE": "4(x", "SLURM_STEP_TASKS_PER_NODE": ""}, "tasks per node"),
    ],
)
def test_inconsistent_values_raise(env: dict[str, str], message: str) -> None:
    with pytest.raises(RuntimeSetupError, match=message.replace("(", r"\(")):
        read_ranks(env)


@pytest.mark.parametrize(("value", "count"), [(None, 0), ("", 0), (" ", 0), ("0", 0), ("3", 3)])
def test_restart_count(value: str | None, count: int) -> None:
    env = {} if value is None else {"SLURM_RESTART_COUNT": value}
    assert restart_count(env) == count


@pytest.mark.parametrize("value", ["x", "-1"])
def test_restart_count_rejects_garbage(value: str) -> None:
    with pytest.raises(RuntimeSetupError, match="SLURM_RESTART_COUNT"):
        restart_count({"SLURM_RESTART_COUNT": value})


def test_job_key() -> None:
    assert job_key({}) is None
    assert job_key({"SLURM_JOB_ID": "36"}) == "36"
    # An array task: its own SLURM_JOB_ID is unique, but A_T is what scontrol and squeue show.
    assert job_key({"SLURM_JOB_ID": "37", "SLURM_ARRAY_JOB_ID": "36", "SLURM_ARRAY_TASK_ID": "1"}) == "36_1"
    assert contract.requeue_marker_name(job_key({"SLURM_JOB_ID": "5"}) or "") == "5.requeue"
    with pytest.raises(RuntimeSetupError, match="not a number"):
        job_key({"SLURM_JOB_ID": "36;rm -rf /"})
    with pytest.raises(RuntimeSetupError, match="not a number"):
        job_key({"SLURM_JOB_ID": "40", "SLURM_ARRAY_JOB_ID": "36", "SLURM_ARRAY_TASK_ID": "[1-3]"})


@pytest.mark.parametrize(
    ("env", "batch"),
    [
        ({}, False),
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "train"}, True),
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "bash"}, False),
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "interactive"}, False),
        # A rendered job is a batch job whatever its name (habitat's heuristic would say "sh" is interactive).
        ({"SLURM_JOB_ID": "1", "SLURM_JOB_NAME": "sh", contract.JOB_NAME: "sh"}, True),
    ],
)
def test_is_slurm_batch_job(env: dict[str, str], batch: bool) -> None:
    assert is_slurm_batch_job(env) is batch


def test_is_rank_zero_from_the_environment() -> None:
    assert is_rank_zero({})
    assert not is_rank_zero(SRUN)
    assert is_rank_zero({**SRUN, "SLURM_PROCID": "0"})
    assert not is_rank_zero(TORCHRUN_IN_SLURM)


@pytest.mark.parametrize("name", ["USR1", "SIGUSR1", "usr1", " USR1 ", str(int(signal.SIGUSR1))])
def test_signal_names(name: str) -> None:
    assert parse_signal_name(name) == signal.SIGUSR1


def test_preemption_signal_off_and_bad() -> None:
    assert preemption_signal({}) is None
    assert preemption_signal({contract.PREEMPT_SIGNAL: ""}) is None
    with pytest.raises(RuntimeSetupError, match="unknown signal"):
        preemption_signal({contract.PREEMPT_SIGNAL: "USR9"})


def test_blocking_survives_exec() -> None:
    """The mask is inherited by the Python program the entry point execs: the signal stays pending.

    (dash, Debian's /bin/sh, clears the mask when it starts; bash and Python keep it.)
    """
    child = "import os, signal;os.kill(os.getpid(), signal.SIGUSR2);print(open('/proc/self/status').read())"
    code = (
        "import os, sys;"
        "from slurmgen.task.signal_block import block_preemption_signal;"
        f"block_preemption_signal({{'{contract.PREEMPT_SIGNAL}': 'USR2'}});"
        f"os.execv(sys.executable, [sys.executable, '-c', {child!r}])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True)
    usr2 = 1 << (int(signal.SIGUSR2) - 1)
    masks = dict(line.split(":\t", 1) for line in done.stdout.splitlines() if line.startswith(("Sig", "Shd")))
    assert int(masks["SigBlk"], 16) & usr2
    assert int(masks["ShdPnd"], 16) & usr2  # sent to the process: pending in the shared set


def test_block_returns_none_when_off() -> None:
    assert block_preemption_signal({}) is None
