"""Local jobs as jobs: how the emulated Slurm ends them, and the job commands (status, logs, history, cancel,
resume) on `local-N` ids, with real runs of the runner."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv
from runtime.runtime_helpers import without_steering

from slurmgen.errors import UsageError
from slurmgen.journal import Entry, find_home
from slurmgen.local import setup
from slurmgen.local.fake_scontrol import ENDING, show_job
from slurmgen.slurm.ids import parse_local_id
from slurmgen.slurm.showjob import job_info, parse_show_job
from slurmgen.spec.load import load_file
from slurmgen.submission.targets import resolve

QUICK = """\
name: quick
command:
  - python3
  - -c
  - "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); \\
print('up', flush=True); pathlib.Path('up').touch(); time.sleep(600)"
time: "00:10:00"
preemption: false
"""

# The job's clock jumps to 1 s before its 10 min limit once the task is up; from then on it runs at real speed, so
# KillWait (10 s) is real seconds.
JUMP_CLOCK = """
import os, sys, time
from pathlib import Path
from slurmgen.local import command, setup
clock = lambda: time.monotonic() + (599 if os.path.exists("up") else 0)
err = lambda line: print(line, file=sys.stderr)
sys.exit(command.run_local(Path("quick.yaml"), setup.Options(), err, clock=clock))
"""


def test_fake_scontrol_shows_a_job_at_its_time_limit_as_ending(tmp_path: Path) -> None:
    env = {"SLURM_JOB_ID": "7", "SLURMGEN_LOCAL_DIR": str(tmp_path)}
    (record,) = parse_show_job(show_job(["7"], env))
    info = job_info(record)
    assert info.state_name == "RUNNING"
    (tmp_path / ENDING).write_text("TIMEOUT\n")  # the runner reached the limit and is ending the job
    (record,) = parse_show_job(show_job(["7"], env))
    info = job_info(record)
    assert (info.state_name, info.reason, info.restarts) == ("COMPLETING", "TimeLimit", 0)


@pytest.mark.slow
def test_a_local_timeout_ends_at_the_term_not_after_kill_wait(tmp_path: Path) -> None:
    """A task that exits at SIGTERM: the job ends as soon as it has, without the SIGKILL after KillWait (the
    batch shell's helper used to wait for a step to stop while the emulated Slurm still said RUNNING)."""
    (tmp_path / "quick.yaml").write_text(QUICK)
    result = subprocess.run(
        [sys.executable, "-c", JUMP_CLOCK],
        cwd=tmp_path,
        env=without_steering(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = result.stderr
    assert result.returncode == 124, err
    assert "time limit 00:10:00 reached: SIGTERM to every process, SIGKILL after 10 s" in err
    assert "TIMEOUT, exit code 124" in err
    assert "SIGKILL to the processes still running" not in err


# --- ids and which job a name means ----------------------------------------------------------------------------------


def local_entry(job_id: str, started: float, name: str = "train") -> Entry:
    return Entry("local", f"local-{job_id}", name, "/w/train.yaml", f"/w/.slurmgen/local/{job_id}", "s", started,
                 job_id=job_id, log_dir="/w/logs")  # fmt: skip


def test_local_ids_are_their_own_form() -> None:
    assert parse_local_id("local-2") == "2" and parse_local_id("LOCAL-02") == "2"
    assert parse_local_id("2") is None and parse_local_id("train") is None
    for bad in ("local-", "local-x", "local-2; rm", "local--1"):
        with pytest.raises(UsageError, match="not a local job id"):
            parse_local_id(bad)


@pytest.mark.parametrize(
    ("text", "number"),
    [("local-3_0", "3_0"), ("local-03_01", "3_1"), ("local-3", "3"), ("3_0", None), ("sweep-lr-local-3", None)],
)
def test_a_local_array_task_is_named_as_slurm_names_one(text: str, number: str | None) -> None:
    assert parse_local_id(text) == number


@pytest.mark.parametrize("bad", ["local-3_", "local-_1", "local-0", "local-0_1", "local-3_1_2", "local-3_x"])
def test_a_bad_local_array_task_id_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="not a local job id"):
        parse_local_id(bad)


def test_a_name_means_its_most_recently_started_job_local_or_submitted(tmp_path: Path) -> None:
    submitted = [Entry("submitted", "t", "train", "/w/train.yaml", "/w/run", "s", 100.0, job_id="2")]
    ran = [local_entry("2", 50.0), local_entry("3", 150.0, name="other")]
    path = tmp_path / "journal.jsonl"
    target = resolve("local-2", submitted, path, local=ran)
    assert (target.local, target.label, target.key) == (True, "local-2", "2")
    plain = resolve("2", submitted, path, local=ran)  # a bare number is always Slurm's job
    assert (plain.local, plain.label) == (False, "2")
    assert resolve("train", submitted, path, local=ran).label == "2"  # the submitted one started later
    later = [local_entry("2", 200.0)]
    assert resolve("train", submitted, path, local=later).label == "local-2"
    assert resolve("/w/train.yaml", [], path, local=later).label == "local-2"
    with pytest.raises(UsageError, match="no local job local-9"):
        resolve("local-9", submitted, path, local=ran)


# --- a state directory shared by two directories ----------------------------------------------------------------------


def test_two_directories_sharing_a_state_dir_get_different_local_ids(tmp_path: Path) -> None:
    shared = tmp_path / "shared-state"
    spec = load_file(
        write(tmp_path / "a.yaml", QUICK.replace("preemption: false", f"preemption: {{state_dir: {shared}}}"))
    )
    ids: dict[str, list[str]] = {}
    for where in ("a", "b", "a", "b"):
        home = tmp_path / where / ".slurmgen"
        ids.setdefault(where, []).append(
            setup.new_job_id(home, lambda job_id: False, setup.state_claim(spec.spec, home, tmp_path / where))
        )
    assert ids == {"a": ["1", "3"], "b": ["2", "4"]}  # each id is one directory's, so one job's state key
    assert (shared / setup.STATE_LEDGER).read_text().count("\n") == 4


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- the job commands on a real local job --------------------------------------------------------------------------

NO_SLURM = """#!/bin/sh
echo "$0 $*" >> "$(dirname "$0")/called"
echo "scontrol: error: not here" >&2
exit 1
"""


def cli_env(tmp_path: Path) -> dict[str, str]:
    """This environment, with `scontrol`/`squeue`/`scancel` that fail and record being called: a local job's
    commands must not ask Slurm."""
    fake = tmp_path / "no-slurm"
    fake.mkdir(exist_ok=True)
    for name in ("scontrol", "squeue", "scancel", "sbatch"):
        write(fake / name, NO_SLURM).chmod(0o755)
    env = without_steering()
    env["PATH"] = f"{fake}:{env['PATH']}"
    return env


def slurmgen(cwd: Path, env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    result = run_slurmgen(*args, cwd=cwd, env=env, timeout=60)
    assert result.returncode == code, (args, result.stdout, result.stderr)
    return result


def start_run(cwd: Path, env: dict[str, str], spec: str) -> subprocess.Popen[str]:
    return subprocess.Popen(slurmgen_argv("run", spec), cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)


def job_number(work: Path) -> str:
    """The id of the one local job run in `work`, from its batch log's name (`logs/quick-<n>.log`)."""
    (log,) = (work / "logs").glob("quick-*.log")
    return log.stem.removeprefix("quick-")


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)


@pytest.mark.slow
def test_status_logs_history_cancel_on_a_running_local_job(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    write(work / "quick.yaml", QUICK)
    run = start_run(work, env, "quick.yaml")
    follow: subprocess.Popen[bytes] | None = None
    try:
        wait_for(work / "up", run)
        n = job_number(work)  # 1, unless another process on this machine holds job 1's rendezvous port
        job = f"local-{n}"
        status = slurmgen(work, env, "status").stdout
        assert re.search(rf"^{job} +quick +RUNNING +0 +0 +127\.0\.0\.1 ", status, re.M), status
        assert slurmgen(work, env, "status", "quick").stdout == status  # a spec name: its last job
        assert f"slurmgen: job {n}, run 1" in slurmgen(work, env, "logs", "quick").stdout  # a spec name: its last job
        assert slurmgen(work, env, "logs", job, "--rank", "0").stdout.endswith("rank-0.log <==\nup\n")
        follow = subprocess.Popen(slurmgen_argv("logs", "-f", job), cwd=work, env=env, stdout=subprocess.PIPE)
        cancelled = slurmgen(work, env, "cancel", job)
        assert f"cancelling {job}: its runner" in cancelled.stderr
        assert run.wait(timeout=60) == 143
        assert follow.wait(timeout=30) == 0  # -f ends when the job has ended
    finally:
        for running in (run, follow):
            if running is not None and running.poll() is None:
                running.kill()
                running.wait()
    assert run.stderr is not None
    err = run.stderr.read()
    assert "cancelled (slurmgen cancel): SIGTERM to every process" in err and "CANCELLED, exit code 143" in err
    assert "SIGKILL to the processes still running" not in err  # the task exited at its TERM
    status = slurmgen(work, env, "status", job).stdout
    assert re.search(rf"^{job} +quick +CANCELLED +0 +0 +127\.0\.0\.1 +143 ", status, re.M), status
    assert re.search(r"^1 .* 127\.0\.0\.1 ", slurmgen(work, env, "history", job).stdout, re.M)
    assert "already ended; nothing to cancel" in slurmgen(work, env, "cancel", job).stderr
    slurmgen(work, env, "requeue", job, code=2)
    assert not (tmp_path / "no-slurm" / "called").exists()  # nothing asked Slurm
    plain = run_slurmgen("history", n, cwd=work, env=env, timeout=60)
    assert f"note: {n} is Slurm's job {n}; the job run here is {job}" in plain.stderr  # then Slurm is asked


@pytest.mark.slow
def test_two_directories_running_at_once_with_one_state_dir(tmp_path: Path) -> None:
    """Two checkouts whose spec names the same absolute state_dir, running at once: before, both ran as job 1, one
    state key for two jobs."""
    env = cli_env(tmp_path)
    spec = QUICK.replace("preemption: false", f"preemption: {{state_dir: {tmp_path / 'shared'}}}")
    runs = []
    try:
        for where in ("a", "b"):
            (tmp_path / where).mkdir()
            write(tmp_path / where / "quick.yaml", spec)
            runs.append(start_run(tmp_path / where, env, "quick.yaml"))
            wait_for(tmp_path / where / "up", runs[-1])
        assert job_number(tmp_path / "a") != job_number(tmp_path / "b")  # one state key per job
        for where in ("a", "b"):
            slurmgen(tmp_path / where, env, "cancel", "quick")
        assert [p.wait(timeout=60) for p in runs] == [143, 143]
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_directory_with_only_local_jobs_is_found_from_below(tmp_path: Path) -> None:
    (tmp_path / ".slurmgen" / "local").mkdir(parents=True)
    (tmp_path / ".slurmgen" / "local" / "journal.jsonl").write_text("")
    (tmp_path / "sub").mkdir()
    assert find_home({}, tmp_path / "sub") == tmp_path / ".slurmgen"  # `slurmgen status` from a subdirectory
