"""The per-node launchers' step lines: `accelerate launch` once per node like torchrun, and the spec's
torchrun.extra_args, placed among the launcher's own options (before the program). The whole scripts are golden
files (jobs/gpu-2node-*.yaml); the jobs run in tests/integrations/test_launchers_local.py."""

from __future__ import annotations

import pytest

from slurmgen.script.step import step_groups
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec
from slurmgen.task import torchrun_agent
from slurmgen.task.launch import parse_args

BASE = "name: t\ncommand: [python, train.py]\ntime: '02:00:00'\n"


def spec(extra: str) -> JobSpec:
    return load_text(BASE + extra, "t.yaml").spec


def test_accelerate_runs_once_per_node_with_every_gpu_of_every_node() -> None:
    s = spec("launcher: accelerate\nnodes: 2\ngpus_per_node: 8\ntorchrun: {extra_args: [--mixed_precision=bf16]}\n")
    srun, agent, launch, entry, command = step_groups(s)
    assert "--ntasks-per-node=1" in srun
    assert agent == ["python3", "-m", "slurmgen.task", "--torchrun-agent", "--"]
    assert launch == [
        "python3", "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines=2", "--num_processes=16",
        "--max_restarts=0", "--mixed_precision=bf16", "--no_python",
    ]  # fmt: skip
    assert entry == ["python3", "-m", "slurmgen.task", "--"] and command == ["python", "train.py"]
    # the entry point takes the agent's line as an agent running accelerate
    flags, words = parse_args([*agent[3:], *launch, *entry, *command])
    assert flags == {"--torchrun-agent"} and torchrun_agent.is_accelerate(words)
    assert not torchrun_agent.is_torchrun(words)


@pytest.mark.parametrize(
    ("extra", "multi"),
    [
        ("nproc_per_node: 3\n", True),  # CPU workers: through torchrun too (its --cpu would start one per node)
        ("nodes: 1\n", False),  # one process in all: accelerate refuses --multi_gpu
        ("gpus_per_node: 4\ntorchrun: {extra_args: [--use_fsdp]}\n", False),  # a mode of its own
    ],
)
def test_accelerate_multi_gpu_only_where_accelerate_takes_it(extra: str, multi: bool) -> None:
    launch = step_groups(spec("launcher: accelerate\n" + extra))[2]
    assert ("--multi_gpu" in launch) is multi
    s = spec("launcher: accelerate\n" + extra)
    assert f"--num_processes={s.nodes * s.nproc_per_node}" in launch


def test_torchrun_extra_args_come_before_the_program() -> None:
    launch = step_groups(spec("launcher: torchrun\nnodes: 2\ntorchrun: {extra_args: [--role, trainer, --tee=3]}\n"))[2]
    assert launch[-4:] == ["--role", "trainer", "--tee=3", "--no-python"]
    assert "--nnodes=2" in launch  # slurmgen's own stay


def test_the_agent_gives_accelerate_the_node_rank_and_the_rendezvous_and_torchrun_the_signals() -> None:
    from slurmgen.job_context.context import JobContext

    args = torchrun_agent.accelerate_args(["--multi_gpu", "--no_python"], 1, "node7", 20011)
    assert args == [
        "--machine_rank=1", "--main_process_ip=node7", "--main_process_port=20011", "--multi_gpu", "--no_python",
    ]  # fmt: skip
    job = JobContext.from_environ({"SLURMGEN_PREEMPT_SIGNAL": "HUP", "SLURMGEN_LEAD_TIME": "900"})
    assert torchrun_agent.accelerate_environ(job) == {
        "PET_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2",
        "PET_SHUTDOWN_TIMEOUT": "900",
    }
    off = JobContext.from_environ({})
    assert torchrun_agent.accelerate_environ(off) == {"PET_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2"}
