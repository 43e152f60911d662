"""The entry point: flags, the environment it hands to an unmodified program, exec, one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime.runtime_helpers import base_env, free_low_port

from slurmgen import contract
from slurmgen.errors import UsageError
from slurmgen.task.launch import parse_args, run
from slurmgen.task.supervisor import TaskSetup

SHOW = (
    "import json, os;"
    "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l);"
    "keys = ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT',"
    " 'NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'TORCH_NCCL_ASYNC_ERROR_HANDLING'];"
    "print(json.dumps({'env': {k: os.environ.get(k) for k in keys}, 'pid': os.getpid(),"
    " 'ppid': os.getppid(), 'blocked': int(status['SigBlk'], 16)}))"
)


def launch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurmgen.task", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def task_env(**extra: str) -> dict[str, str]:
    values = {
        "SLURM_JOB_ID": "7",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_NODEID": "0",
        "SLURM_STEP_TASKS_PER_NODE": "2",
        "SLURM_STEP_NODELIST": "localhost",
        "SLURM_JOB_NODELIST": "localhost",
        contract.PORT: str(free_low_port()),
        contract.PORT_RANGE: "1",
    }
    values.update(extra)
    return base_env(**values)


@pytest.mark.parametrize(
    ("argv", "flags", "command"),
    [
        (["--", "python", "-c", "x"], set(), ["python", "-c", "x"]),
        (["python", "--flag"], set(), ["python", "--flag"]),
        (
            ["--torchrun-agent", "--", "torchrun", "--nnodes=2"],
            {"--torchrun-agent"},
            ["torchrun", "--nnodes=2"],
        ),
        (["--rendezvous"], {"--rendezvous"}, []),
    ],
)
def test_parse_args(argv: list[str], flags: set[str], command: list[str]) -> None:
    assert parse_args(argv) == (flags, command)


@pytest.mark.parametrize("argv", [[], ["--"], ["--bogus", "--", "x"], ["--rendezvous", "--", "x"], ["--help"]])
def test_bad_arguments(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        parse_args(argv)


@pytest.fixture
def signal_mask() -> Iterator[None]:
    """run() blocks the signals its supervisor handles in this thread: give the test process its mask back."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, before)


def test_run_sets_the_variables_and_supervises(signal_mask: None, tmp_path: Path) -> None:
    plans: list[TaskSetup] = []

    def supervise(plan: TaskSetup) -> int:
        plans.append(plan)
        return 0

    env = task_env(**{contract.LOG_DIR: str(tmp_path), contract.PREEMPT_SIGNAL: "USR1"})
    assert run(["--", "prog", "a"], env, supervise=supervise) == 0
    (plan,) = plans
    assert (plan.command, plan.rank, plan.handler, plan.preempt) == (("prog", "a"), 1, "auto", signal.SIGUSR1)
    assert plan.log_path == str(tmp_path / "rank-1.log")
    assert {os.getppid(), 1} <= plan.stepwide  # whoever started the entry point (slurmstepd) and its ancestors
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == (
        "1",
        "2",
        "1",
        "2",
    )
    assert env["MASTER_ADDR"] == "localhost"
    assert env["GLOO_SOCKET_IFNAME"] == "lo"
    assert env["NCCL_SOCKET_IFNAME"] == "=lo"
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert {signal.SIGUSR1, signal.SIGTERM, signal.SIGCHLD} <= blocked  # before anything slow


def test_run_reports_a_missing_command(signal_mask: None) -> None:
    lines: list[str] = []
    assert run(["--", "nosuch"], task_env(), err=lines.append) == 127
    assert lines == ["slurmgen: cannot run 'nosuch': command not found"]


def test_unmodified_program_sees_the_standard_variables_as_the_supervisors_child() -> None:
    env = task_env(**{contract.PREEMPT_SIGNAL: "USR1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "slurmgen.task", "--", sys.executable, "-c", SHOW],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    shown = json.loads(out)
    assert shown["ppid"] == proc.pid  # the entry point stays as the program's supervisor
    assert shown["env"] == {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": env[contract.PORT],
        "NCCL_SOCKET_IFNAME": "=lo",
        "GLOO_SOCKET_IFNAME": "lo",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    assert shown["blocked"] == 1 << (signal.SIGUSR1 - 1)  # only the preemption signal, until Preemption's handler


def test_torchrun_agent_blocks_the_signal_and_gets_no_ranks() -> None:
    env = task_env(**{contract.PREEMPT_SIGNAL: "USR1", contract.LAUNCHER: "torchrun"})
    done = launch(["--torchrun-agent", "--", sys.executable, "-c", SHOW], env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    # Blocked: the workers get it from slurmstepd directly, and torchrun must not die of it while importing.
    assert shown["blocked"] & 1 << (signal.SIGUSR1 - 1)
    assert shown["env"]["RANK"] is None
    assert shown["env"]["MASTER_ADDR"] == "localhost"


def test_rendezvous_prints_address_and_port() -> None:
    env = task_env(SLURM_JOB_ID="1042", **{contract.PORT: "20000", contract.PORT_RANGE: "100"})
    done = launch(["--rendezvous"], env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "localhost 20042\n", "")
    read = subprocess.run(
        [
            "bash",
            "-c",
            f"read -r A P < <({sys.executable} -m slurmgen.task --rendezvous); echo $A:$P",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert read.stdout == "localhost:20042\n"


@pytest.mark.parametrize(
    ("args", "extra", "expected"),
    [
        (
            ["--rendezvous"],
            {"SLURM_JOB_NODELIST": "nosuch-host.invalid", "SLURM_STEP_NODELIST": ""},
            "slurmgen: master address 'nosuch-host.invalid' (from SLURM_JOB_NODELIST) does not resolve",
        ),
        (["--rendezvous"], {contract.PORT: "40000", contract.PORT_RANGE: "10"}, "ephemeral range"),
        (["--", "true"], {"SLURM_JOB_NODELIST": "n[2-1]", "SLURM_STEP_NODELIST": ""}, "invalid hostlist"),
        (["--", "true"], {"MASTER_PORT": "99999"}, "MASTER_PORT='99999' is not a port number"),
        (["--", "true"], {contract.PREEMPT_SIGNAL: "USR9"}, "unknown signal 'USR9'"),
        (["--", "nosuch-command-xyz"], {}, "slurmgen: cannot run 'nosuch-command-xyz': command not found"),
        (["--nope"], {}, "slurmgen: unknown option '--nope'"),
        ([], {}, "slurmgen: no command to run"),
    ],
)
def test_startup_errors_are_one_line_without_traceback(args: list[str], extra: dict[str, str], expected: str) -> None:
    done = launch(args, task_env(**extra))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("slurmgen: ")
    assert expected in first
    assert len(done.stderr.splitlines()) == 1 or "usage:" in done.stderr


def test_the_agent_passes_a_preemption_signal_that_came_before_its_workers_on_to_them() -> None:
    """A signal pending in the agent (blocked, sent before the workers existed) is taken and sent to each worker:
    a real child, a real signal. Forked children do not inherit pending signals (fork(2)), so without this the
    workers never got it."""
    from slurmgen.task.torchrun_agent import pass_pending

    waiter = "import signal, sys; signal.sigwait({signal.SIGUSR1}); sys.exit(7)"
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        workers = [subprocess.Popen([sys.executable, "-c", waiter]) for _ in range(2)]  # the mask is inherited
        assert not pass_pending(signal.SIGUSR1, [w.pid for w in workers])  # nothing pending: nothing sent
        # To this thread, which blocks it (as the agent's only thread did when its entry point blocked it): a signal
        # to the process would go to another thread of the test runner (pytest-xdist's), which does not block it.
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        assert pass_pending(signal.SIGUSR1, [w.pid for w in workers])
        assert [w.wait(timeout=60) for w in workers] == [7, 7]
        assert signal.SIGUSR1 not in signal.sigpending()  # taken, not left for the agent's own unblock
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_a_task_expands_its_per_task_words_and_variables_from_its_own_environment() -> None:
    """`--expand=I,J` and `--expand-env=NAME=VALUE` (slurmgen/script/expansion.py writes them): read from the
    task's environment, its ranks set; every value read before any is set, and `$$` is one `$`."""
    from slurmgen.task.launch import expand_per_task, parse_all

    flags, expansions, command = parse_all(
        ["--expand-env=TAG=r${RANK}", "--expand-env=SEEN=${TAG:-unset}", "--expand=1,2", "--", "prog",
         "--rank=${RANK}", "$${RANK}-${SLURM_PROCID}", "${RANK}"]
    )  # fmt: skip
    assert flags == set() and len(expansions) == 3
    environ = {"RANK": "3", "SLURM_PROCID": "3"}
    assert expand_per_task(expansions, command, environ) == ["prog", "--rank=3", "${RANK}-3", "${RANK}"]
    assert (environ["TAG"], environ["SEEN"]) == ("r3", "unset")
    with pytest.raises(UsageError, match="the command has words 0 to 1"):
        expand_per_task(["--expand=5"], ["prog", "x"], {})
