"""The local `scontrol show step` and `scancel --signal`: a running fake srun registers its step, and a signal for the
step reaches it (it passes it to every task, as slurmstepd does), with real processes and real signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmgen import contract
from slurmgen.local import fake_scancel, fake_scontrol, jobenv
from slurmgen.local.fake_srun import register_step, step_file
from slurmgen.slurm.parse import parse_steps

CATCHER = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7)); print('up', flush=True); "
    "time.sleep(60)"
)


def test_a_registered_step_is_shown_and_signalled(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "7", "SLURMGEN_LOCAL_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", CATCHER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        (tmp_path / "step-0.pid").write_text(f"{proc.pid}\n")  # as its fake srun would
        (tmp_path / "step-1.pid").write_text("999999999\n")  # a step that has ended
        records = parse_steps(fake_scontrol.run(["--oneliner", "show", "step", "7"], env))
        assert [(str(r.step), r.srun_pid) for r in records] == [("7.batch", None), ("7.0", proc.pid)]
        fake_scancel.run(["--signal=TERM", "7.0"], env)
        assert proc.wait(timeout=30) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(fake_scancel.ScancelError, match="already completing or completed"):
        fake_scancel.run(["--signal=TERM", "7.1"], env)
    with pytest.raises(fake_scancel.ScancelError, match="Invalid job id"):
        fake_scancel.run(["--signal=TERM", "8.0"], env)
    with pytest.raises(fake_scancel.ScancelError, match="only `scancel --signal=SIG"):
        fake_scancel.run(["7"], env)
    with pytest.raises(fake_scontrol.ScontrolError, match="Invalid job id"):
        fake_scontrol.run(["show", "step", "8"], env)


def test_srun_registers_its_step_while_it_runs(tmp_path: Path) -> None:
    path = register_step(str(tmp_path), 3)
    assert path == step_file(str(tmp_path), 3) and Path(path).read_text().strip().isdigit()
    assert register_step(None, 3) is None
    assert fake_scontrol.running_steps(str(tmp_path)) == [(3, int(Path(path).read_text()))]  # this process: alive


def test_the_bad_node_rehearsal_fails_the_checks_of_its_node_only(tmp_path: Path) -> None:
    """`slurmgen run --bad-node`: the fake srun runs the real node checks (batch/node_check.py) on every node but
    the one named, which answers as a failed health check; any other step runs as written there."""
    env = {
        **os.environ,
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "127.0.0.[1-2]",
        "SLURMGEN_LOCAL_DIR": str(tmp_path),
        jobenv.BAD_NODE: "127.0.0.2",
    }
    srun = [sys.executable, "-m", "slurmgen.local.fake_srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]
    checks = [sys.executable, "-m", contract.NODE_CHECK_ENTRY, "--timeout=5"]
    done = subprocess.run([*srun, *checks], env=env, capture_output=True, text=True, timeout=60, check=True)
    verdicts = sorted((v["node"], v["ok"], v["reason"]) for v in map(json.loads, done.stdout.splitlines()))
    assert verdicts == [
        ("127.0.0.1", True, ""),
        ("127.0.0.2", False, "health check failed (rehearsal: slurmgen run --bad-node)"),
    ], done.stderr
    other = [sys.executable, "-c", "import os, sys; sys.stdout.write(os.environ['SLURMD_NODENAME'] + ' ')"]
    done = subprocess.run([*srun, *other], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert sorted(done.stdout.split()) == ["127.0.0.1", "127.0.0.2"], done.stderr
