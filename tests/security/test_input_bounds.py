"""Resource and input bounds, each tried as the attack or the mistake that broke it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_run import run_slurmgen, slurmgen_argv

from slurmgen.errors import SpecError
from slurmgen.local import setup
from slurmgen.slurm.hostlist import HostlistError, expand_hostlist
from slurmgen.slurm.times import parse_time
from slurmgen.spec.load import load_text
from slurmgen.spec.sweep import MAX_POINTS
from slurmgen.spec.yaml_source import MAX_NODES, _merged_size, load_yaml

BASE = 'name: x\ncommand: [python3, -c, "1"]\ntime: "00:10:00"\n'


def one_line_error(text: str) -> str:
    with pytest.raises(SpecError) as raised:
        load_text(text, "x.yaml")
    (line,) = str(raised.value).splitlines()
    return line


@pytest.mark.parametrize(
    ("target", "kind"),
    [("/dev/null", "a character device"), ("fifo", "a FIFO"), ("/proc/self/fd/1", "a symbolic link")],
)
def test_render_o_writes_only_regular_files(tmp_path: Path, target: str, kind: str) -> None:
    (tmp_path / "x.yaml").write_text(BASE)
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
    done = subprocess.run(slurmgen_argv("render", "x.yaml", "-o", target), cwd=tmp_path, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    assert done.returncode != 0 and f"is {kind}" in done.stderr and "-o - for standard output" in done.stderr
    assert Path("/dev/null").is_char_device()  # was: replaced by a regular file (as root, the system's own)
    if target == "fifo":
        assert (tmp_path / "fifo").is_fifo()
    to_stdout = run_slurmgen("render", "x.yaml", "-o", "-", cwd=tmp_path)
    assert to_stdout.returncode == 0 and to_stdout.stdout.startswith("#!/bin/bash")


def test_a_merge_key_bomb_is_counted_before_yaml_flattens_it() -> None:
    """PyYAML 6.0.3 flattens nested merges by copying: 2^N pairs for N lines (a 458-byte spec took 5.4 GB). The
    guard counts what flattening makes, per mapping once, on the composed nodes, whatever PyYAML does."""
    lines = ["a0: &a0 {x: 1, y: 2}"] + [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}" for i in range(1, 40)]
    text = BASE + "\n".join(lines) + "\n"
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    assert node is not None
    assert _merged_size(node.value[-1][1], {}) == 2**40  # what an amplifying flatten would build
    problems = load_yaml(text, "x.yaml")[1]
    assert problems == [] or "alias bomb" in problems[0].message  # 6.0.4 dedups; older versions are refused


def test_merge_keys_with_an_override_work() -> None:
    spec = load_text(BASE + 'env:\n  <<: {A: "1", B: "2"}\n  B: "3"\n', "x.yaml").spec
    assert spec.env == (("A", "1"), ("B", "3"))  # was: "duplicate key" for B
    doc, problems = load_yaml("b: &b {p: 1, q: 2}\nm:\n  <<: *b\n  q: 3\n", "m.yaml")
    assert problems == [] and doc is not None and doc.value["m"] == {"p": 1, "q": 3}


def test_a_large_explicit_sweep_is_accepted_up_to_the_stated_bound() -> None:
    points = "".join(f"    - {{lr: {i}, seed: {i % 7}}}\n" for i in range(10_000))
    text = BASE.replace('"1"]', '"{lr}", "{seed}"]') + "sweep:\n  points:\n" + points
    spec = load_text(text, "x.yaml")  # was: "more than 20000 values (an alias bomb?)"
    assert spec.spec.sweep is not None and len(spec.spec.sweep.points) == 10_000 <= MAX_POINTS
    anchored = "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * (MAX_NODES // 1000 + 1)) + "]\n"
    assert "alias bomb" in load_yaml(anchored, "bomb.yaml")[1][0].message  # aliases stay bounded


def test_bare_hostlist_and_time_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(HostlistError, match=r"longer than 18 digits"):
        expand_hostlist("n[1-" + "9" * 5000 + "]")  # was: a bare ValueError (int() of 5000 digits)
    with pytest.raises(ValueError, match=r"\(5000 characters\) is not a Slurm time"):
        parse_time("9" * 5000)
    env = {"SLURM_JOB_ID": "7", "SLURMGEN_LOCAL_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "slurmgen.local.fake_scontrol", "show", "hostnames",
                           "n[1-" + "9" * 5000 + "]"], env={**os.environ, **env}, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    line = one_line_error(BASE.replace('"00:10:00"', '"' + "9" * 5000 + '"'))
    assert "time:" in line and len(line) < 400


@pytest.mark.parametrize("field", ["output", "chdir", "preemption: {state_dir"])
def test_a_tilde_path_is_refused_and_said(field: str) -> None:
    text = BASE + (f"{field}: ~/x}}\n" if "{" in field else f"{field}: ~/logs\n")
    line = one_line_error(text)
    assert "~ is not expanded here (it would make a directory named ~)" in line  # was: a directory named ~


@pytest.mark.parametrize("char", ["\u202e", "\u200b", "\u2066"])
@pytest.mark.parametrize("where", ["name", "env value", "command word", "sweep value"])
def test_bidi_and_zero_width_characters_are_refused_in_any_spec_string(char: str, where: str) -> None:
    texts = {
        "name": BASE.replace("name: x", f"name: x{char}y"),
        "env value": BASE + f"env: {{A: 'a{char}b'}}\n",
        "command word": BASE.replace('"1"]', f'"1{char}"]'),
        "sweep value": BASE.replace('"1"]', '"{v}"]') + f"sweep: {{grid: {{v: ['a{char}b']}}}}\n",
    }
    line = one_line_error(texts[where])
    assert "invisible format character" in line and f"U+{ord(char):04X}" in line


def test_a_local_run_caps_its_tasks_at_what_the_machine_can_run(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(BASE)
    done = run_slurmgen("run", "x.yaml", "--nodes", "254", "--tasks-per-node", "1024", cwd=tmp_path)
    assert done.returncode != 0  # was: 260,096 processes started
    (line,) = done.stderr.strip().splitlines()
    assert "is 260096 local processes; this machine runs at most" in line
    assert str(setup.local_task_cap()) in line


@pytest.mark.slow
def test_logs_streams_a_log_larger_than_the_memory_limit(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(BASE + "preemption: false\n")
    assert run_slurmgen("run", "x.yaml", cwd=tmp_path).returncode == 0
    (log,) = (tmp_path / "logs").glob("x-*.log")
    job = log.stem.removeprefix("x-")
    size = 1 << 30  # 1 GiB (sparse) against a 700 MB address-space limit
    os.truncate(log, size)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (700 << 20, 700 << 20))

    with (tmp_path / "printed").open("wb") as printed:
        done = subprocess.run(slurmgen_argv("logs", f"local-{job}"), cwd=tmp_path, stdout=printed,
                              stderr=subprocess.PIPE, preexec_fn=limit, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]  # was: MemoryError
    assert (tmp_path / "printed").stat().st_size >= size
