"""The README is right when copied: its blocks are taken from README.md itself, as written. The set-up block
works on a fresh Debian with Debian's own python3 (whose bare `pip install` is refused); CI runs exactly the
development set-up; every Python block compiles; the Preemption section's training program runs on a local 2x2
job (`slurmgen run`, Slurm emulated), once straight through and once preempted (`--preempt-after`), and both end
with the same weights."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import slurmgen_argv
from runtime.runtime_helpers import without_steering

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PY = sys.executable
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[tuple[str, str]]:
    """(the section's heading, the block's text) for every fenced block of LANGUAGE in README.md."""
    text = README.read_text()
    out = []
    for found in FENCE.finditer(text):
        if found[1] == language:
            headings = re.findall(r"^#+ (.*)$", text[: found.start()], re.MULTILINE)
            out.append((headings[-1] if headings else "", found[2]))
    return out


def preemption_program() -> str:
    programs = [code for heading, code in blocks("python") if heading.startswith("Preemption:")]
    assert len(programs) == 1, "the Preemption section has one training program"
    return programs[0]


def section_block(heading: str, language: str = "bash") -> str:
    found = [code for title, code in blocks(language) if title.startswith(heading)]
    assert found, f"README.md has no {language} block under a heading starting {heading!r}"
    return found[0]


def test_ci_runs_exactly_the_development_set_up_and_the_one_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    commands = [line for line in ci if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == section_block("Development").splitlines()
    assert commands[-1] == "python -m pytest"


SYSTEM_PYTHON = Path("/usr/bin/python3")


def system_python_problem() -> str | None:
    if not SYSTEM_PYTHON.exists():
        return "needs the distribution's /usr/bin/python3"
    if not list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED")):
        return "needs a system Python marked externally managed (PEP 668), as Debian 12's"
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import ensurepip, venv"], capture_output=True, timeout=60)
    return None if probe.returncode == 0 else "needs python3-venv (apt-get install python3-venv)"


@pytest.mark.slow
def test_the_set_up_block_works_on_a_fresh_debian_python(tmp_path: Path) -> None:
    problem = system_python_problem()
    if problem is not None:
        pytest.skip(problem)
    checkout = tmp_path / "slurmgen"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, checkout / name)
    for name in ("slurmgen", "templates", "jobs"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    # A new login on a fresh machine: Debian's python3 first on PATH, no venv active. The machine's own pip
    # settings (PIP_*: its wheel cache and indexes) are kept; PIP_NO_COMPILE only skips compiling torch's
    # bytecode at install time.
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    env.update(PATH="/usr/bin:/bin", HOME=str(tmp_path / "home"), LANG="C.UTF-8", PIP_NO_COMPILE="1")

    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "-e", "."], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr, refused.stderr

    set_up = section_block("Set up and run")
    assert set_up.splitlines()[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", set_up], cwd=checkout, env=env, capture_output=True, text=True, timeout=500
    )
    assert done.returncode == 0, done.stderr[-3000:]
    script = done.stdout[done.stdout.index("#!/bin/bash\n") :]  # after pip's own lines: the rendered script
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name='cpu-debug'\n") and script.endswith("exit $?\n")
    venv_python = checkout / ".venv" / "bin" / "python"
    version = subprocess.run(
        [venv_python, "-c", "import torch, slurmgen.runtime; print(torch.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert version.stdout.startswith("2.13.0"), version.stderr


def test_every_python_block_compiles() -> None:
    found = blocks("python")
    assert len(found) >= 5
    for heading, code in found:
        compile(code, f"README.md ({heading})", "exec")


def free_ports(count: int) -> list[int]:
    """Ports free now, below the ephemeral range (the spec's computed-port path, range 1)."""
    ports: list[int] = []
    for port in range(21000 + (id(ports) // 16) % 3000, 25000):
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError("no free ports")


def spec(out: Path, port: int) -> Path:
    path = out / "readme.yaml"
    path.write_text(
        "name: readme\n"
        f"command: [{PY}, train.py]\n"
        "time: '00:10:00'\n"
        "nodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {PY}\n"
        f"chdir: {out}\n"
        f"output: {out}/logs\n"
        f"distributed: {{backend: gloo, port: {port}, port_range: 1, timeout: 60, barrier_timeout: 30}}\n"
        "preemption: {max_requeues: 2}\n"
        "env: {OMP_NUM_THREADS: '1'}\n"
    )
    return path


@pytest.mark.slow
@pytest.mark.torch
def test_the_preemption_example_resumes_to_the_weights_of_an_uninterrupted_run(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    program = preemption_program()
    runs = {}
    for name, port in zip(("straight", "preempted"), free_ports(2), strict=True):
        out = tmp_path / name
        out.mkdir()
        (out / "train.py").write_text(program)
        args = ["--preempt-after", "3"] if name == "preempted" else []
        with open(out / "runner.err", "wb") as err:
            runs[name] = subprocess.Popen(
                slurmgen_argv("run", str(spec(out, port)), *args), cwd=out, env=without_steering(), stderr=err
            )
    try:
        codes = {name: proc.wait(timeout=400) for name, proc in runs.items()}
    finally:
        for proc in runs.values():
            if proc.poll() is None:
                proc.terminate()  # SIGTERM: the runner ends every process of its job
                proc.wait(timeout=60)
    straight, preempted = tmp_path / "straight", tmp_path / "preempted"
    for out in (straight, preempted):
        logs = "\n".join(p.read_text(errors="replace") for p in sorted((out / "logs").rglob("*.log")))
        assert codes[out.name] == 0, (out / "runner.err").read_text()[-3000:] + logs[-3000:]
    runner = (preempted / "runner.err").read_text()
    assert runner.count("requeue requested") == 1 and "run 2 started with SLURM_RESTART_COUNT=1" in runner, runner
    assert "requeue requested" not in (straight / "runner.err").read_text()
    reference = torch.load(straight / "model.pt")
    resumed = torch.load(preempted / "model.pt")
    assert reference.keys() == resumed.keys() == {"weight"}
    assert torch.equal(reference["weight"], resumed["weight"])  # bit-identical, not merely close
