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


def test_accelerate_is_a_per_node_launcher_like_torchrun() -> None:
    s = spec("launcher: accelerate\nnodes: 2\ngpus_per_node: 4\n")
    assert (s.tasks_per_node, s.nproc_per_node, s.world_size, s.per_node_launcher) == (1, 4, 8, True)
    assert spec().per_node_launcher is False


def test_one_gpu_request_in_sbatch_alone_and_a_gres_that_is_no_gpu_are_kept() -> None:
    """Only a second GPU request is refused: GPUs asked for per task alone, or another generic resource, pass."""
    assert spec("sbatch: {gpus-per-task: 1}\n").sbatch == (("gpus-per-task", "1"),)
    assert spec("gpus_per_node: 2\nsbatch: {gres: 'nvme:1'}\n").sbatch == (("gres", "nvme:1"),)


def test_short_limit_gets_a_quarter_as_lead_time() -> None:
    assert spec(overrides=["time=8"]).preemption.lead_time == 120


@pytest.mark.parametrize(
    ("text", "notes"),
    [
        # the note is located at the limit that caused it, and is no warning
        ("time: '00:16:00'\n", ["t.yaml:3: preemption.lead_time: not given, so 240 s, a quarter of the 00:16:00 "]),
        ("time: '00:20:00'\n", []),  # a quarter is the default itself
        ("time: '00:16:00'\npreemption: {lead_time: 240}\n", []),
        ("time: '00:16:00'\npreemption: {enabled: false}\n", []),
        ("time: '00:03:00'\n", ["t.yaml:3: preemption.lead_time: not given, so 45 s, a quarter of the 00:03:00 "]),
    ],
)
def test_a_lead_time_cut_to_the_limit_is_a_note(text: str, notes: list[str]) -> None:
    loaded = load_text("name: t\ncommand: [python, train.py]\n" + text, "t.yaml")
    shown = [str(note) for note in loaded.notes]
    assert len(shown) == len(notes), shown
    assert all(line.startswith(want) for line, want in zip(shown, notes, strict=True)), shown
    assert not any("not given" in str(w) for w in loaded.warnings)


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


def test_an_override_that_goes_inside_a_number_names_the_override() -> None:
    with pytest.raises(SpecError) as exc:
        spec("nodes: 2\n", overrides=["nodes.x=1"])
    assert [str(p) for p in exc.value.problems] == [
        "--set: nodes.x: the override tries to go inside nodes, which is a number (2); write --set nodes=VALUE"
    ]
    with pytest.raises(SpecError) as exc:
        spec(overrides=["command.0=python3"])
    assert [str(p) for p in exc.value.problems] == [
        "--set: command.0: the override tries to go inside command, which is a list; write --set command=VALUE"
    ]


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("64G", "64G"),
        ("32g", "32G"),
        ("32GB", "32G"),
        ("32gb", "32G"),
        ("4000mb", "4000M"),
        ("1t", "1T"),
        ("512k", "512K"),
        ("0", "0"),
        ("2048", "2048"),
    ],
)
def test_mem_takes_what_slurm_takes_and_writes_it_plainly(text: str, rendered: str) -> None:
    assert spec(f"mem: {text}\n").mem == rendered
    assert spec(overrides=[f"mem={text}"]).mem == rendered


def test_mem_as_a_small_bare_number_warns_that_slurm_reads_megabytes() -> None:
    assert warnings("mem: 32\n") == [
        "t.yaml:4: mem: 32 without a unit is 32 MB for Slurm; write 32G for gigabytes or 32M to keep it"
    ]
    assert warnings("mem: 2048\n") == warnings("mem: 32M\n") == warnings("mem: 0\n") == []


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
        ("gpus_per_node: 2\n", "the default USR1 is lost under NCCL 2.12 only"),
        ("gpus_per_node: 2\ndistributed:\n  backend: gloo\n", "gloo with GPUs only reduces CPU tensors"),
        ("preemption:\n  lead_time: 30\n", "30 s is shorter than a typical checkpoint"),
        ("distributed:\n  timeout: 900\n", "900 s is not below preemption.lead_time (300 s)"),
        ("env:\n  WANDB_API_KEY: abc\n", "looks like a secret written into the script"),
        ("env:\n  SLURM_CPU_BIND: none\n", "SLURM_* variables are Slurm's own"),
    ],
)
def test_warnings(extra: str, expected: str) -> None:
    assert any(expected in w for w in warnings(extra)), warnings(extra)


def test_the_nccl_usr1_warning_comes_only_where_it_can_apply_and_can_be_acknowledged() -> None:
    """NCCL 2.12 caught USR1 (NVIDIA/nccl#704). The warning comes only for the default signal of an
    NCCL program that gets the signal itself, points at the line that chose NCCL, and writing the signal (even
    USR1) acknowledges it, so `validate --strict` passes."""
    nccl = [w for w in warnings("gpus_per_node: 2\n") if "NCCL 2.12" in w]
    assert len(nccl) == 1 and nccl[0].startswith("t.yaml:4: preemption.signal: "), nccl
    assert "write signal: USR1 to keep it" in nccl[0]
    assert warnings("gpus_per_node: 2\npreemption: {signal: USR1}\n") == []  # acknowledged
    assert warnings("gpus_per_node: 2\npreemption: {handler: requeue}\n") == []  # the program never gets USR1
    assert warnings("gpus_per_node: 2\npreemption: {signal: HUP}\n") == []
    assert warnings("gpus_per_node: 2\npreemption: false\n") == []
    assert warnings("gpus_per_node: 2\npreemption: {handler: program}\n") == nccl
    backend = [w for w in warnings("gpus_per_node: 2\ndistributed:\n  backend: nccl\n") if "NCCL 2.12" in w]
    assert backend and backend[0].startswith("t.yaml:6: "), backend  # the backend line, where it is written


def test_shell_pitfalls_in_the_command_warn() -> None:
    # In a list the user wrote each argument, so a `>` may be meant: a warning. A bare `>` in a string command is
    # an error (tests/spec/bad_specs/command-string-*.yaml); quoted, it is an argument, warned about here.
    for command in ['[python, t.py, ">", out]', "python t.py '>' out"]:
        assert any(
            "passed to your program as an argument" in w
            for w in [str(w) for w in load_text(BASE.replace("[python, train.py]", command), "t").warnings]
        )
    assert any(
        "does not pass signals on" in w
        for w in [str(w) for w in load_text(BASE.replace("[python, train.py]", "[bash, -c, x]"), "t").warnings]
    )


def test_examples_have_no_errors() -> None:
    for path in sorted(Path(__file__).parent.parent.parent.joinpath("jobs").glob("*.yaml")):
        load_text(path.read_text(), str(path))


def test_the_preemption_handler_defaults_to_auto_and_reaches_the_script() -> None:
    from slurmgen.script.render import render

    assert spec().preemption.handler == "auto"
    text = render(spec("preemption: {handler: requeue}\n"))
    assert "export SLURMGEN_PREEMPT_HANDLER='requeue'" in text
    assert "SLURMGEN_PREEMPT_HANDLER" not in render(spec("preemption: false\n"))


def test_a_signal_of_ones_own_with_preemption_off_is_trapped_and_forwarded() -> None:
    """sbatch: {signal: B:USR1@90} with preemption off: allowed, and the batch shell traps it (bash would die of
    it otherwise) and passes it to the step; without B: Slurm sends it to the step itself."""
    from slurmgen.script.render import render

    own = spec("preemption: false\nsbatch: {signal: 'B:USR1@90'}\n")
    text = render(own)
    assert "#SBATCH --signal='B:USR1@90'" in text and "trap '_sg_forward USR1' USR1" in text
    assert 'mkdir -p "${SLURMGEN_LOG_DIR}";' in text  # no state directory when preemption is off
    steps_only = render(spec("preemption: false\nsbatch: {signal: 'USR2@90'}\n"))
    assert "#SBATCH --signal='USR2@90'" in steps_only and "trap '_sg_forward USR1'" not in steps_only


def test_the_command_script_and_where_it_must_be(tmp_path: Path) -> None:
    from slurmgen.spec.where import command_script, missing_script

    cases = {
        ("python", "-u", "-W", "ignore", "train.py", "--lr", "1"): "train.py",
        ("python3", "-m", "pkg.train"): None,
        ("bash", "-c", "echo hi"): None,
        ("bash", "run.sh"): "run.sh",
        ("./scripts/go", "--fast"): "./scripts/go",
        ("torchrun", "--nproc-per-node", "2", "train.py"): "train.py",
        ("nvidia-smi",): None,
    }
    for command, script in cases.items():
        assert command_script(command) == script, command
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "train.py").write_text("")
    assert missing_script(spec(), "t.yaml", tmp_path / "work") is None
    assert missing_script(spec("chdir: work\n"), "t.yaml", tmp_path) is None
    problem = missing_script(spec(), "t.yaml", tmp_path)
    assert problem is not None and str(problem) == (
        f"t.yaml: command: train.py does not exist in {tmp_path} (the directory you submit from, where the job "
        "runs); check the path, submit from the directory that holds it, or set chdir"
    )


def test_a_bare_variable_in_env_is_named_as_not_expanded_with_its_braced_spelling() -> None:
    assert warnings("env: {OMP_NUM_THREADS: $SLURM_CPUS_PER_TASK}\n") == [
        "t.yaml:4: env.OMP_NUM_THREADS: $SLURM_CPUS_PER_TASK is not expanded: the task gets the text "
        "'$SLURM_CPUS_PER_TASK' as written; write ${SLURM_CPUS_PER_TASK} to have it expanded, or "
        "$$SLURM_CPUS_PER_TASK to keep the $ and silence this warning"
    ]
    assert warnings("env: {PRICE: 'costs $5', PATH_LIKE: /opt/bin, N: '${SLURM_CPUS_PER_TASK}', D: '$$HOME'}\n") == []
