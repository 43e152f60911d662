"""Spec loading: defaults that depend on other fields, overrides, canonical forms and warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmgen.errors import SpecError
from slurmgen.spec.load import load_text
from slurmgen.spec.model import JobSpec

BASE = "name: t\ncommand: [python, train.py]\ntime: '01:00:00'\n"


def spec(extra: str = "", overrides: list[str] | None = None) -> JobSpec:
    return load_text(BASE + extra, "t.yaml", overrides).spec


def warnings(extra: str = "") -> list[str]:
    return [str(w) for w in load_text(BASE + extra, "t.yaml").warnings]


def test_cpu_defaults() -> None:
    s = spec()
    assert (s.nodes, s.gpus_per_node, s.tasks_per_node, s.launcher) == (1, 0, 1, "srun")
    assert s.distributed.backend == "gloo"
    assert (s.distributed.port, s.distributed.port_range) == (8738, 127)
    assert s.preemption.enabled and s.preemption.signal == "USR1"
    assert s.preemption.lead_time == 300  # 300 s, or a quarter of the limit when that is shorter
    assert s.preemption.state_dir == "logs/state"
    assert s.time == "01:00:00" and s.time_seconds == 3600


def test_gpu_defaults_follow_gpus() -> None:
    s = spec("gpus_per_node: 4\nnodes: 2\n")
    assert s.distributed.backend == "nccl"
    assert s.tasks_per_node == 4 and s.world_size == 8


def test_torchrun_runs_one_task_per_node() -> None:
    s = spec("launcher: torchrun\ngpus_per_node: 8\n")
    assert (s.tasks_per_node, s.nproc_per_node) == (1, 8)
    cpu = spec("launcher: torchrun\nnproc_per_node: 3\n")
    assert (cpu.tasks_per_node, cpu.nproc_per_node) == (1, 3)


def test_short_limit_gets_a_quarter_as_lead_time() -> None:
    assert spec(overrides=["time=8"]).preemption.lead_time == 120


@pytest.mark.parametrize(
    ("text", "normal", "seconds"),
    [
        ("30", "00:30:00", 1800),
        ("10:30", "00:11:00", 660),
        ("2-12", "2-12:00:00", 216000),
        ("1-0:30", "1-00:30:00", 88200),
    ],
)
def test_time_forms(text: str, normal: str, seconds: int) -> None:
    s = spec(overrides=[f"time={text!r}"])
    assert (s.time, s.time_seconds) == (normal, seconds)


def test_seconds_are_rounded_up_with_a_warning() -> None:
    assert any(
        "Slurm rounds seconds up to whole minutes: 10:30 becomes 00:11:00" in w
        for w in [str(w) for w in load_text(BASE.replace("'01:00:00'", "'10:30'"), "t.yaml").warnings]
    )


@pytest.mark.parametrize("given", ["SIGHUP", "hup", "1", 1])
def test_signal_spellings(given: object) -> None:
    assert spec(f"preemption:\n  signal: {json.dumps(given)}\n").preemption.signal == "HUP"


def test_preemption_can_be_switched_off_two_ways() -> None:
    assert not spec("preemption: false\n").preemption.enabled
    assert not spec("preemption:\n  enabled: false\n").preemption.enabled
    assert not spec(overrides=["preemption=false"]).preemption.enabled


def test_overrides_are_validated_like_the_file() -> None:
    s = spec(overrides=["nodes=3", "distributed.port=20000", "env.A=1"])
    assert (s.nodes, s.distributed.port, dict(s.env)) == (3, 20000, {"A": "1"})
    with pytest.raises(SpecError) as exc:
        spec(overrides=["nodes=010", "bogus=1"])
    lines = [str(p) for p in exc.value.problems]
    assert "--set: nodes: YAML reads `010` as 8 (octal/hex); write it in plain decimal" in lines
    assert any(line.startswith("--set: bogus: unknown key") for line in lines)


def test_command_string_is_split_with_shell_rules() -> None:
    s = spec(overrides=["command='python train.py --name \"a b\"'"])
    assert s.command == ("python", "train.py", "--name", "a b")


def test_env_numbers_keep_their_text() -> None:
    s = spec("env:\n  OMP_NUM_THREADS: 8\n  ZERO_PADDED: 007\n  RATIO: 1.50\n")
    assert dict(s.env) == {"OMP_NUM_THREADS": "8", "ZERO_PADDED": "007", "RATIO": "1.50"}


def test_digest_changes_with_the_spec_and_only_then() -> None:
    assert spec().digest == spec().digest
    assert spec().digest != spec(overrides=["nodes=2"]).digest


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("gpus_per_node: 2\n", "NCCL 2.12 caught USR1"),
        ("gpus_per_node: 2\ndistributed:\n  backend: gloo\n", "gloo with GPUs only reduces CPU tensors"),
        ("preemption:\n  lead_time: 30\n", "30 s is shorter than a typical checkpoint"),
        ("distributed:\n  timeout: 900\n", "900 s is not below preemption.lead_time (300 s)"),
        ("env:\n  WANDB_API_KEY: abc\n", "looks like a secret written into the script"),
        ("env:\n  SLURM_CPU_BIND: none\n", "SLURM_* variables are Slurm's own"),
    ],
)
def test_warnings(extra: str, expected: str) -> None:
    assert any(expected in w for w in warnings(extra)), warnings(extra)


def test_shell_pitfalls_in_the_command_warn() -> None:
    assert any(
        "passed to your program as an argument" in w
        for w in [str(w) for w in load_text(BASE.replace("[python, train.py]", "python t.py > out"), "t").warnings]
    )
    assert any(
        "does not pass signals on" in w
        for w in [str(w) for w in load_text(BASE.replace("[python, train.py]", "[bash, -c, x]"), "t").warnings]
    )


def test_examples_have_no_errors() -> None:
    for path in sorted(Path(__file__).parent.parent.parent.joinpath("jobs").glob("*.yaml")):
        load_text(path.read_text(), str(path))
