"""`slurmgen run` of a sweep and of a plain array on this machine: every task as an emulated array task (its own
job, the SLURM_ARRAY_* variables), at most max_parallel (the array's %) at once, and a summary at the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen.slurm.client import clean_submit_env

pytestmark = pytest.mark.slow

POINT = Path(__file__).resolve().parent / "sweep_point.py"
PY = sys.executable


def run(tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "job.yaml"
    path.write_text(text)
    env = clean_submit_env(os.environ) | {"SLURMGEN_HOME": str(tmp / ".slurmgen")}
    return run_slurmgen("run", str(path), cwd=tmp, env=env)


def records(tmp: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((tmp / "out").glob("run-*.json"))]


def test_a_local_sweep_runs_every_point_as_an_array_task_within_max_parallel(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    command = [PY, str(POINT), str(tmp_path / "out"), "1", "{x}"]
    done = run(
        tmp_path,
        f"name: loc\ncommand: {json.dumps(command)}\ntime: '5'\npython: {PY}\noutput: logs\n"
        "sweep:\n  grid: {x: [0, 1, 2]}\n  max_parallel: 2\n",
    )
    assert done.returncode == 3, done.stderr  # point 1 (x odd) fails: the first failure's exit code
    got = records(tmp_path)
    assert sorted(int(r["index"]) for r in got) == [0, 1, 2]  # type: ignore[call-overload]
    assert all(r["params"] == {"x": r["index"]} for r in got)
    arrays = [r["array"] for r in got]
    assert all(isinstance(a, dict) for a in arrays)
    assert {a["SLURM_ARRAY_TASK_COUNT"] for a in arrays} == {"3"}  # type: ignore[index]
    assert sorted(a["SLURM_ARRAY_TASK_ID"] for a in arrays) == ["0", "1", "2"]  # type: ignore[index]
    assert len({a["SLURM_ARRAY_JOB_ID"] for a in arrays}) == 1  # type: ignore[index]
    sweep = {r["sweep"] for r in got}
    assert len(sweep) == 1 and {r["group"] for r in got} == sweep
    spans = sorted((float(r["start"]), float(r["end"])) for r in got)  # type: ignore[arg-type]
    assert not (spans[0][1] > spans[2][0] and spans[1][1] > spans[2][0]), spans  # never all three at once
    assert "x=1: FAILED, exit code 3" in done.stderr
    assert done.stderr.rstrip().endswith("3 task(s): 2 completed, 1 failed")


def test_a_plain_array_runs_locally(tmp_path: Path) -> None:
    code = "import os; open(f\"{os.environ['SLURM_ARRAY_TASK_ID']}.done\", 'w').write(os.environ['SLURM_JOB_ID'])"
    done = run(tmp_path, f"name: arr\ncommand: {json.dumps([PY, '-c', code])}\ntime: '5'\npython: {PY}\n"
               "array: 3,5%1\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("*.done")) == ["3.done", "5.done"]
    assert (tmp_path / "3.done").read_text() != (tmp_path / "5.done").read_text()  # each task is a job of its own
    assert "2 task(s): 2 completed, 0 failed" in done.stderr
