"""Sweeps on a real Slurm 22.05 with MaxArraySize=4: a separate cluster instance (tests/cluster/up.sh
--instance 7 with SLURMGEN_CLUSTER_EXTRA_CONF), started and stopped by this module's fixture, so the shared
test cluster keeps Slurm's default (other tests submit arrays). The slurmgen CLI runs as a user would run it,
in a subprocess, against that instance.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from cluster_instance import instance_with

pytestmark = pytest.mark.slurm

INSTANCE = "7"
SELECT = ["--slurm", "22.05", "--instance", INSTANCE]
MAX_ARRAY_SIZE = 4
POINT = Path(__file__).resolve().parent / "sweep_point.py"
PY = sys.executable


@pytest.fixture(scope="module")
def small_arrays() -> Iterator[dict[str, str]]:
    """The environment of a CLI that talks to a 22.05 cluster whose MaxArraySize is 4. Torn down at the end,
    whatever happened (unless another session still uses it)."""
    with instance_with("22.05", INSTANCE, f"MaxArraySize={MAX_ARRAY_SIZE}") as client_env:
        config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env=client_env)
        assert re.search(rf"^MaxArraySize\s*=\s*{MAX_ARRAY_SIZE}$", config.stdout, re.M), (
            f"instance {INSTANCE} runs without MaxArraySize={MAX_ARRAY_SIZE}; another session started it differently"
        )
        yield client_env


def cli(env: dict[str, str], cwd: Path, *args: str, check: bool = True) -> str:
    result = run_slurmgen(*args, cwd=cwd, env=env, timeout=60)
    assert result.returncode == 0 or not check, f"slurmgen {' '.join(args)}: {result.stderr}"
    return result.stdout


def spec(tmp: Path, name: str, xs: list[int], seconds: float, extra: str = "", steps: str = "") -> Path:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    command = [PY, str(POINT), str(out), str(seconds), "{x}", *steps.split()]
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"name: {name}\ncommand: {json.dumps(command)}\ntime: '5'\npython: {PY}\noutput: {tmp}/logs\n"
        f"cpus_per_task: 1\nsweep:\n  grid: {{x: {xs}}}\n{extra}"
    )
    return path


def wait_until(env: dict[str, str], tmp: Path, sweep: str, done: re.Pattern[str], timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    while True:
        table = cli(env, tmp, "status", sweep)
        if any(done.search(line) for line in table.splitlines() if line.startswith("sweep ")):
            return table
        if time.monotonic() > deadline:
            return table
        time.sleep(0.5)


def point_rows(table: str) -> list[list[str]]:
    """The status table's point rows (after the header; not the sweep line or the goodput line under it)."""
    return [line.split() for line in table.splitlines()[1:] if line.split() and line.split()[0].isdigit()]


def runs(tmp: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((tmp / "out").glob("run-*.json"))]


def most_at_once(records: list[dict[str, object]]) -> int:
    edges = sorted([(float(r["start"]), 1) for r in records] + [(float(r["end"]), -1) for r in records])  # type: ignore[arg-type]
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_a_split_grid_runs_each_point_once_within_max_parallel_and_resubmit_reruns_the_failed(  # type: ignore[no-untyped-def]
    small_arrays, tmp_path: Path
) -> None:
    env = small_arrays
    path = spec(tmp_path, "swgrid", list(range(7)), 1.5, "  max_parallel: 2\n")
    sweep = cli(env, tmp_path, "submit", str(path)).strip()
    table = wait_until(env, tmp_path, sweep, re.compile(r"7 points: (\d+ (COMPLETED|FAILED)(, )?)+$"))
    first = runs(tmp_path)
    assert sorted(int(r["index"]) for r in first) == list(range(7)), table  # type: ignore[call-overload]
    assert all(r["params"] == {"x": r["index"]} and r["x"] == r["index"] for r in first)
    assert {r["sweep"] for r in first} == {sweep} and {r["group"] for r in first} == {sweep}
    arrays = {str(r["key"]).split("_")[0] for r in first}
    assert len(arrays) == 2, first  # 7 points at MaxArraySize 4: two arrays
    assert most_at_once(first) <= 2, first
    # status: one row per point, the failed ones (odd x) FAILED with exit code 3.
    rows = point_rows(table)
    assert [(r[0], r[1], r[3], r[-1]) for r in rows] == [
        (str(i), f"x={i}", "FAILED" if i % 2 else "COMPLETED", "3" if i % 2 else "0") for i in range(7)
    ], table
    assert f"sweep {sweep}: 7 points: 4 COMPLETED, 3 FAILED" in table.splitlines()
    for x in (1, 3, 5):
        (tmp_path / "out" / f"allow-{x}").touch()
    cli(env, tmp_path, "resubmit", sweep, "--failed")
    table = wait_until(env, tmp_path, sweep, re.compile(r"7 points: 7 COMPLETED, 2 submissions$"))
    again = [r for r in runs(tmp_path) if r not in first]
    assert sorted(int(r["index"]) for r in again) == [1, 3, 5], table  # type: ignore[call-overload]
    assert all(r["params"] == {"x": r["index"]} for r in again)
    newer = {str(r["key"]) for r in again}
    shown = {r[2] for r in point_rows(table) if r[0] in ("1", "3", "5")}
    assert shown == newer, table  # status shows each point's latest run
    # A point's log, by its index.
    key = next(str(r["key"]) for r in again if r["index"] == 3)
    assert f"slurmgen: job {key}, run 1," in cli(env, tmp_path, "logs", sweep, "--point", "3")


def test_a_signalled_point_is_requeued_alone_and_resumes_from_its_own_state(  # type: ignore[no-untyped-def]
    small_arrays, tmp_path: Path
) -> None:
    env = small_arrays
    path = spec(tmp_path, "swpre", [0, 2], 0.1, steps="--steps 60")
    sweep = cli(env, tmp_path, "submit", str(path)).strip()
    deadline = time.monotonic() + 60
    while not all("READY" in cli(env, tmp_path, "logs", sweep, "--point", str(i), check=False) for i in (0, 1)):
        assert time.monotonic() < deadline, "the points did not start"
        time.sleep(0.5)
    time.sleep(1.5)
    cli(env, tmp_path, "cancel", sweep, "--point", "1", "--signal", "USR1")
    table = wait_until(env, tmp_path, sweep, re.compile(r"2 points: 2 COMPLETED$"), timeout=120)
    rows = {r[0]: r for r in point_rows(table)}
    assert (rows["0"][4], rows["1"][4]) == ("0", "1"), table  # restarts: only point 1 was requeued
    done = {(int(r["index"]), int(r["restart"])): r for r in runs(tmp_path)}  # type: ignore[call-overload]
    assert set(done) == {(0, 0), (1, 1)}, done
    assert "resumed" not in done[(0, 0)]
    resumed = done[(1, 1)]["resumed"]
    assert isinstance(resumed, list)
    resumed_x, resumed_step = int(resumed[0]), int(resumed[1])
    assert resumed_x == 2 and 0 < resumed_step < 60  # its own state: its own x, the step it stopped at
    log = cli(env, tmp_path, "logs", sweep, "--point", "1")
    assert re.search(rf"STOP x=2 at step {resumed_step}\b", log), log[-2000:]
    assert f"RESUMED x=2 at step {resumed_step}" in log
    history = cli(env, tmp_path, "history", sweep, "--point", "1")
    runs_shown = [line.split()[0] for line in history.splitlines() if line[:1].isdigit()]
    assert runs_shown == ["1", "2"] and "requested" in history, history  # the point's own runs
    assert [line.split()[0] for line in cli(env, tmp_path, "history", sweep, "--point", "0").splitlines()
            if line[:1].isdigit()] == ["1"]  # fmt: skip


API_SCRIPT = """
import json, sys
from pathlib import Path
import slurmgen

out = Path(sys.argv[2])
if sys.argv[1] == "submit":
    sweep = slurmgen.submit_sweep(sys.argv[3])
    print(json.dumps({"id": sweep.id, "n": len(sweep), "final": sweep.wait(timeout=90)}))
else:  # another process attaches by the sweep's id, reruns the failed points and waits again
    sweep = slurmgen.Sweep(sys.argv[3])
    for x in (1,):
        (out / f"allow-{x}").touch()
    again = sweep.resubmit(failed=True)
    final = sweep.wait(timeout=90)
    points = sweep.points()
    print(json.dumps({"again": again, "final": final, "values": [p["values"] for p in points],
                      "log": sweep.logs(1)}))
"""


def test_the_python_api_submits_waits_and_resubmits_a_sweep(  # type: ignore[no-untyped-def]
    small_arrays, tmp_path: Path
) -> None:
    """slurmgen.submit_sweep / slurmgen.Sweep on the real cluster: 3 points, point 1 fails until allowed; a second
    process attaches by the sweep's id and reruns exactly the failed point."""
    path = spec(tmp_path, "swapi", [0, 1, 2], 0.5, "  max_parallel: 3\nrecovery: false\n")
    script = tmp_path / "api.py"
    script.write_text(API_SCRIPT)

    def api(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [PY, str(script), *args], capture_output=True, text=True, cwd=tmp_path, env=small_arrays, timeout=150
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
        return result

    first = api("submit", str(tmp_path / "out"), str(path))
    assert first["n"] == 3 and first["final"] == {"0": "COMPLETED", "1": "FAILED", "2": "COMPLETED"}, first
    second = api("attach", str(tmp_path / "out"), str(first["id"]))
    assert second["again"] == [1], second
    assert second["final"] == {"0": "COMPLETED", "1": "COMPLETED", "2": "COMPLETED"}, second
    assert second["values"] == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert "run 1," in str(second["log"])
    assert sorted(int(r["index"]) for r in runs(tmp_path)) == [0, 1, 1, 2]  # type: ignore[call-overload]
