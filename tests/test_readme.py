"""The README and the manual are right when copied: their blocks are taken from README.md and docs/ as written.
The set-up block works on a fresh Debian with Debian's own python3 (whose bare `pip install` is refused) and
installs the CPU build of torch, while the commented GPU line beside it resolves the CUDA build; CI runs exactly the
development set-up; every Python block compiles; the training program of "A first preemption-safe program" (the
same in docs/preemption.md) runs on a local 2x2 job (`slurmgen run`, Slurm emulated), once straight through and once
preempted (`--preempt-after`), and both end with the same weights."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import slurmgen_argv
from doc_blocks import DOCS, README, REPO, blocks, section_block
from runtime.runtime_helpers import without_steering

PY = sys.executable


def preemption_program() -> str:
    programs = [b.code for b in blocks("python", [README]) if b.heading.startswith("A first preemption-safe program")]
    assert len(programs) == 1, "the README's first preemption-safe program is one block"
    manual = [b.code for b in blocks("python", [DOCS / "preemption.md"]) if b.heading.startswith("Preemption:")]
    assert manual == programs, "docs/preemption.md shows the README's training program, the one this test runs"
    return programs[0]


def test_ci_runs_exactly_the_development_set_up_and_the_one_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    commands = [line for line in ci if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == section_block(README, "Development").splitlines()
    assert commands == section_block(DOCS / "development.md", "Development").splitlines()
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
    if not resolves(CPU_INDEX_HOST):
        # A machine that cannot reach PyTorch's CPU index (the test machine reaches only the package index and its
        # own wheel directory, which holds 2.13.0+cpu): pip warns once per package instead of retrying five
        # times with back-off, minutes in all. What the CPU index resolves to is the next tests' question.
        env["PIP_RETRIES"] = "0"

    refused = subprocess.run(
        ["python3", "-m", "pip", "install", "-e", "."], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr, refused.stderr

    set_up = section_block(README, "Set up and run")
    assert set_up == section_block(DOCS / "index.md", "Set up and run"), "the manual's set-up block is the README's"
    assert set_up.splitlines()[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install")
    assert set_up.splitlines()[1].startswith("# with NVIDIA GPUs"), "the GPU line is beside the CPU line"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", set_up], cwd=checkout, env=env, capture_output=True, text=True, timeout=500
    )
    assert done.returncode == 0, done.stderr[-3000:]
    script = done.stdout[done.stdout.index("#!/bin/bash\n") :]  # after pip's own lines: the rendered script
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name='cpu-debug'\n") and script.endswith("exit $?\n")
    venv_python = checkout / ".venv" / "bin" / "python"
    installed = subprocess.run(
        [venv_python, "-c", INSTALLED],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    torch_version, *names = installed.stdout.split()
    assert torch_version == "2.13.0+cpu", installed.stderr  # the CPU build, in the one copied line
    assert not [name for name in names if name.startswith("nvidia")], names


# The torch the program imports, then every distribution of the venv.
INSTALLED = (
    "import importlib.metadata as m, torch, slurmgen.runtime; "
    "print(torch.__version__, *sorted(d.metadata['Name'].lower() for d in m.distributions()))"
)
CPU_INDEX_HOST = "download.pytorch.org"
PACKAGE_INDEX_HOST = "pypi.org"


def resolves(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def set_up_pip_lines() -> dict[str, list[str]]:
    """The `pip install` arguments of the set-up block's CPU line and of the GPU line in the comment beside it."""
    cpu, gpu = section_block(README, "Set up and run").splitlines()[:2]
    assert gpu.startswith("# with NVIDIA GPUs, instead: python3 -m venv"), gpu
    return {name: shlex.split(line.rsplit("&& pip install", 1)[1]) for name, line in (("cpu", cpu), ("gpu", gpu))}


def resolve_from_public_indexes(args: list[str], tmp_path: Path) -> dict[str, str]:
    """{name: version} that `pip install ARGS` would download on a machine with no pip settings of its own: only
    the package index and the indexes ARGS name (`--dry-run --report`: metadata only, no wheel is fetched)."""
    checkout = tmp_path / "slurmgen"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, checkout / name)
    for name in ("slurmgen", "templates"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, HOME=str(tmp_path / "home"))
    report = tmp_path / "report.json"
    done = subprocess.run(
        [PY, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", report, *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in found}


@pytest.mark.slow
def test_the_gpu_line_beside_the_set_up_block_resolves_the_cuda_build(tmp_path: Path) -> None:
    """What the CPU line spares a first local run: the plain line's CUDA libraries (measured once by hand with the
    report's URLs: torch 527 MB, triton and 15 nvidia-* packages, 2.74 GB in all for torch 2.13.0 on Linux)."""
    if not resolves(PACKAGE_INDEX_HOST):
        pytest.skip(f"needs the package index ({PACKAGE_INDEX_HOST})")
    resolved = resolve_from_public_indexes(set_up_pip_lines()["gpu"], tmp_path)
    assert resolved["torch"] == "2.13.0"
    cuda = [name for name in resolved if name.startswith("nvidia")]
    assert len(cuda) >= 10, resolved


@pytest.mark.slow
def test_the_set_up_blocks_cpu_line_resolves_no_cuda_package(tmp_path: Path) -> None:
    """The README's line against the real indexes (the fresh-machine test above takes 2.13.0+cpu from this
    machine's wheel directory when PyTorch's index is out of reach)."""
    for host in (PACKAGE_INDEX_HOST, CPU_INDEX_HOST):
        if not resolves(host):
            pytest.skip(f"needs {host}")
    resolved = resolve_from_public_indexes(set_up_pip_lines()["cpu"], tmp_path)
    assert resolved["torch"] == "2.13.0+cpu"
    assert not [name for name in resolved if name.startswith("nvidia")], resolved


def test_the_readme_is_a_front_door_not_a_manual() -> None:
    """Under 200 lines, read in one sitting: what slurmgen is, the set-up, a first run, submit and program, and
    links; the manual lives in docs/."""
    lines = README.read_text().splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_every_python_block_compiles() -> None:
    found = blocks("python")
    assert len(found) >= 8
    for block in found:
        compile(block.code, block.where(), "exec")


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
