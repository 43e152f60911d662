"""`launcher: accelerate` and `torchrun.extra_args` under `slurmgen run --local`: a real accelerate program
(data/accelerate_launched.py: `Accelerator()`, an all-reduce, a few DDP steps) on 2 emulated nodes x 2 workers,
gloo on the CPU. One `accelerate launch` per node, given its --machine_rank and the rendezvous by slurmgen's
agent, starts two workers through torchrun; the four join one process group (the all-reduce sums 1+2+3+4) and end
with the same weights. Preempted, the signal reaches every worker as under torchrun. The same program under
`launcher: torchrun` with extra_args shows torchrun took them (--role names the workers' role, --log-dir gets
torchrun's own logs). The real cluster runs the accelerate job too (test_launchers_cluster.py)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import slurmgen_argv
from runtime.runtime_helpers import without_steering

from .integration_helpers import needs
from .launched_job import rank_lines, spec_text

pytestmark = [pytest.mark.torch, pytest.mark.slow]


@dataclass(frozen=True)
class Run:
    code: int
    runner: str
    logs: str  # every rank's and node's log


def run_local(out: Path, text: str, *options: str) -> Run:
    spec = out / "launched.yaml"
    spec.write_text(text)
    done = subprocess.run(
        slurmgen_argv("run", "--local", str(spec), *options),
        cwd=out, env=without_steering(), capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    logs = "\n".join(p.read_text(errors="replace") for p in sorted((out / "logs").rglob("*.log")))
    return Run(done.returncode, done.stderr, logs)


def test_accelerate_launch_once_per_node_runs_one_process_group_of_four(tmp_path: Path) -> None:
    needs("accelerate")
    run = run_local(tmp_path, spec_text(tmp_path, "accelerate", ["--role=trainer"], args=[], preemption="false"))
    assert run.code == 0, run.runner + run.logs[-4000:]
    assert "COMPLETED, exit code 0, 1 run" in run.runner, run.runner
    lines = rank_lines(run.logs)
    assert [(rank, world, local, node) for rank, world, local, node, *_ in lines] == [
        ("0", "4", "0", "0"), ("1", "4", "1", "0"), ("2", "4", "0", "1"), ("3", "4", "1", "1"),
    ], run.logs[-4000:]  # fmt: skip
    assert {(role, total, launched) for _, _, _, _, role, total, launched, _ in lines} == {("trainer", "10", "yes")}
    assert len({digest for *_, digest in lines}) == 1  # DDP kept the four in step
    assert "Traceback" not in run.logs


def test_a_preemption_signal_reaches_every_accelerate_worker(tmp_path: Path) -> None:
    """handler: program: slurmgen delivers USR1 and leaves the rest to the program, which every worker gets (the
    agent blocks it, so neither accelerate nor its torchrun dies of it); rank 0 saves, all exit 0."""
    needs("accelerate")
    saved = tmp_path / "saved"
    args = ["--sleep", "200", "--save-on-signal", str(saved)]
    text = spec_text(tmp_path, "accelerate", [], args=args, preemption="{handler: program, lead_time: 120}")
    run = run_local(tmp_path, text, "--preempt-after", "40")
    assert run.code == 0, run.runner + run.logs[-4000:]
    assert "SIGUSR1 to the batch shell at 40 s of run 1" in run.runner, run.runner
    assert sorted(re.findall(r"rank (\d): got SIGUSR1 at step 0", run.logs)) == ["0", "1", "2", "3"], run.logs
    assert saved.read_text() == "saved\n"
    assert "COMPLETED, exit code 0, 1 run" in run.runner, run.runner


def test_torchrun_takes_the_extra_args(tmp_path: Path) -> None:
    needs("accelerate")
    logs = tmp_path / "torchrun-logs"
    text = spec_text(tmp_path, "torchrun", ["--role=trainer", f"--log-dir={logs}"], args=[], preemption="false")
    run = run_local(tmp_path, text)
    assert run.code == 0, run.runner + run.logs[-4000:]
    lines = rank_lines(run.logs)
    assert sorted(rank for rank, *_ in lines) == ["0", "1", "2", "3"], run.logs[-4000:]
    assert {(role, total, launched) for _, _, _, _, role, total, launched, _ in lines} == {("trainer", "10", "no")}
    assert logs.is_dir() and list(logs.iterdir())  # torchrun's own per-run log directories


def test_accelerates_torchrun_reads_the_signals_and_the_shutdown_timeout_the_agent_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """accelerate passes torchrun neither --signals-to-handle nor --shutdown-timeout; the agent's PET_* variables
    are what torchrun's parser then takes, as accelerate builds its arguments (accelerate.utils.launch)."""
    needs("accelerate")
    import argparse

    import torch.distributed.run as torchrun
    from accelerate.utils.launch import _filter_args

    from slurmgen.job_context.context import JobContext
    from slurmgen.task.torchrun_agent import accelerate_environ

    job = JobContext.from_environ({"SLURMGEN_PREEMPT_SIGNAL": "USR1", "SLURMGEN_LEAD_TIME": "240"})
    for name, value in accelerate_environ(job).items():
        monkeypatch.setenv(name, value)
    given = ["--training_script", "x", "--training_script_args"]
    args = _filter_args(argparse.Namespace(num_processes=4), torchrun.get_args_parser(), given)
    assert (args.signals_to_handle, args.shutdown_timeout) == ("SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2", 240)
