"""Jobs run here through the one job interface, with real runs of the runner: the id `slurmgen run` prints is the
id status/logs/history/cancel take, `slurmgen.Job("local-N")` answers as the CLI does, and a local sweep is found
afterwards by its id, spec, name or array id, with no state left by its completed points."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import slurmgen
from slurmgen.local.setup import STATE_LEDGER

from .test_local_jobs import QUICK, cli_env, start_run, wait_for, write
from .test_local_jobs import slurmgen as cli

pytestmark = pytest.mark.slow

PY = sys.executable
# It also writes bytes that are not UTF-8: b"bad \xff\xfe end\n".
NOT_UTF8 = "sys.stdout.buffer.write(b'bad ' + bytes([255, 254]) + b' end' + bytes([10]))"
SHORT = f"""\
name: short
command: ["{PY}", "-c", "import sys; print('hello from short', flush=True); {NOT_UTF8}"]
time: "00:05:00"
python: {PY}
output: logs
"""
# The point's resume state, as a program that saved once leaves it: <state_dir>/<key>.state
SAVE = (
    "import os, sys; e = os.environ; key = e['SLURM_ARRAY_JOB_ID'] + '_' + e['SLURM_ARRAY_TASK_ID']; "
    "open(os.path.join(e['SLURMGEN_STATE_DIR'], key + '.state'), 'w').write('saved'); print('lr', sys.argv[1])"
)
# A sweep with the default preemption: each point has resume state, which the batch shell removes once the point
# completed and the (emulated) scontrol says it was not requeued.
SWEEP = f"""\
name: sweep-lr
command: ["{PY}", "-c", "{SAVE}", "{{lr}}"]
time: "00:05:00"
python: {PY}
output: logs
sweep:
  grid: {{lr: [1, 2]}}
"""


def printed_ids(stderr: str) -> list[str]:
    """Every job id `slurmgen run` printed at the head of its lines, in order, once each."""
    return list(dict.fromkeys(re.findall(r"^slurmgen: (local-[0-9_]+): ", stderr, re.M)))


def run_spec(work: Path, env: dict[str, str], spec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "slurmgen", "run", spec],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )  # errors: SHORT's program writes bytes that are not UTF-8, and the runner shows what the job printed


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the API finds the journal from here, as the CLI does
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    return work


def test_the_printed_id_is_the_one_the_commands_and_the_api_take(tmp_path: Path, work: Path) -> None:
    env = cli_env(tmp_path)
    write(work / "short.yaml", SHORT)
    done = run_spec(work, env, "short.yaml")
    assert done.returncode == 0, done.stderr
    [job] = printed_ids(done.stderr)  # before: `local job 1: ...`, and `1` is Slurm's job 1
    assert f"{job}: COMPLETED, exit code 0" in done.stderr
    assert re.search(rf"^{job} +short +COMPLETED ", cli(work, env, "status", job).stdout, re.M)
    # Not UTF-8: `slurmgen logs` writes the bytes the program wrote, as the bytes form of Job.logs returns them;
    # logs() decodes them, with U+FFFD for each byte that is not UTF-8.
    raw = subprocess.run([PY, "-m", "slurmgen", "logs", job, "--rank", "0"], cwd=work, env=env, capture_output=True,
                         timeout=120, check=True).stdout  # fmt: skip
    assert b"hello from short" in raw and b"bad \xff\xfe end\n" in raw, raw
    assert re.search(r"^1 .* 127\.0\.0\.1 +0", cli(work, env, "history", job).stdout, re.M)
    handle = slurmgen.Job(job)
    assert (handle.id, handle.state(), handle.exit_code) == (job, "COMPLETED", 0)
    assert "hello from short" in handle.logs() and "hello from short" in handle.logs(rank=0)
    assert handle.log_bytes(rank=0) == raw
    assert "bad \ufffd\ufffd end" in handle.logs(rank=0)
    assert [run["run"] for run in handle.history()] == [1]
    assert slurmgen.Job.from_spec("short.yaml") == handle
    assert not (tmp_path / "no-slurm" / "called").exists()  # nothing asked Slurm


def test_job_local_n_cancels_a_running_job(tmp_path: Path, work: Path) -> None:
    env = cli_env(tmp_path)
    write(work / "quick.yaml", QUICK)
    run = start_run(work, env, "quick.yaml")
    try:
        wait_for(work / "up", run)
        job = slurmgen.Job.from_spec("quick").id  # its last job: the one running
        handle = slurmgen.Job(job)
        assert handle.state() == "RUNNING" and handle.exit_code is None
        handle.cancel()
        assert run.wait(timeout=60) == 143
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.stderr is not None and f"slurmgen: {job}: " in run.stderr.read()
    ended = slurmgen.Job(job)  # a fresh handle: mypy took the first one's exit_code for None for good
    assert (ended.state(), ended.exit_code) == ("CANCELLED", 143)
    assert handle.wait(timeout=5) == "CANCELLED"


def test_a_local_sweep_is_found_afterwards(tmp_path: Path, work: Path) -> None:
    env = cli_env(tmp_path)
    write(work / "sweep-lr.yaml", SWEEP)
    done = run_spec(work, env, "sweep-lr.yaml")
    assert done.returncode == 0, done.stderr
    sweep_id = re.findall(r"^slurmgen: sweep (\S+): 2 task", done.stderr, re.M)[0]
    points = printed_ids(done.stderr)
    array = points[0].partition("_")[0]  # local-3: the array's id, as Slurm's 123 names its array
    assert sorted(points) == [f"{array}_0", f"{array}_1"]
    for name in (sweep_id, "sweep-lr", "sweep-lr.yaml", array):
        status = cli(work, env, "status", name).stdout
        # ELAPSED: each point's run, from its start to its end, as squeue's %M
        assert re.search(rf"^1 +lr=2 +{array}_1 +COMPLETED +0 +\d\d:\d\d:\d\d +0$", status, re.M), (name, status)
        assert status.splitlines()[-1] == f"sweep {sweep_id}: 2 points: 2 COMPLETED"
        assert "lr 2" in cli(work, env, "logs", name, "--point", "1").stdout
        assert re.search(r"^1 .* 127\.0\.0\.1 +0", cli(work, env, "history", name, "--point", "0").stdout, re.M)
        assert "has no task left to cancel" in cli(work, env, "cancel", name).stderr
    for point in points:  # each point by the id printed for it
        assert "lr " in cli(work, env, "logs", point).stdout
        assert re.search(rf"^{point} +sweep-lr +COMPLETED", cli(work, env, "status", point).stdout, re.M)
    assert "is a sweep; name one point" in cli(work, env, "logs", "sweep-lr", code=2).stderr
    # history SWEEP: every point's runs, the point's values beside them
    runs = [line.split()[:3] for line in cli(work, env, "history", "sweep-lr").stdout.splitlines()]
    assert runs == [["POINT", "VALUES", "RUN"], ["0", "lr=1", "1"], ["1", "lr=2", "1"]], runs
    # report SWEEP: the totals are the sums of the points, which carry their values and how they ended
    roll = json.loads(cli(work, env, "report", sweep_id, "--json").stdout)
    points = roll["points"]
    assert [(p["values"], p["outcome"], p["requeues"], p["restarts"]) for p in points.values()] == [
        ({"lr": 1}, "completed", 0, 0), ({"lr": 2}, "completed", 0, 0)]  # fmt: skip
    for key in ("wall_seconds", "queue_seconds"):
        assert roll[key] == pytest.approx(sum(p[key] for p in points.values()), abs=0.002), key
    # its program never calls Preemption and has no progress.pattern: no point's progress is known, nor the sweep's
    assert [p["productive_seconds"] for p in points.values()] == [None, None], points
    assert (roll["progress_known"], roll["productive_seconds"], roll["goodput"]) == (False, None, None), roll
    assert roll["wall_seconds"] > 0 and roll["run_count"] == 2 and roll["outcomes"] == {"completed": 2}
    for bucket, seconds in roll["buckets"].items():
        assert seconds == pytest.approx(sum(p["buckets"][bucket] for p in points.values()), abs=0.002), bucket
    table = cli(work, env, "report", sweep_id).stdout
    assert re.search(r"^1 +lr=2 +completed +1 +0 +0 .* unknown +unknown$", table, re.M), table
    assert re.search(r"^total +2 completed .* unknown +unknown$", table, re.M), table
    assert "their program's progress is unknown" in table.splitlines()[0], table
    state = sorted(p.name for p in (work / "logs" / "state").rglob("*") if p.is_file() and p.name != STATE_LEDGER)
    # The ids' ledger is no job's state. Before: 3_0.state and 3_1.state, "Slurm could not be asked whether job 3_0
    # was requeued".
    assert state == []
    history = cli(work, env, "history", f"{array}_0").stdout
    assert "could not be asked" not in history and "state kept" not in history
    sweep = slurmgen.Sweep("sweep-lr")  # the API takes the same names, through the same handles
    assert (sweep.id, len(sweep), sweep.status()) == (sweep_id, 2, {0: "COMPLETED", 1: "COMPLETED"})
    assert sweep.values(1) == {"lr": 2} and "lr 2" in sweep.logs(1)
    assert sweep.job(0) == slurmgen.Job(f"{array}_0") and [r["run"] for r in sweep.job(0).history()] == [1]
    assert sweep.cancel() == [] and sweep.wait(timeout=5) == {0: "COMPLETED", 1: "COMPLETED"}
    assert not (tmp_path / "no-slurm" / "called").exists()  # nothing asked Slurm
