"""A clean stop of a local job keeps its state, and `slurmgen resume local-N` continues from it (a
stopped job is not a completed one; the cluster twin is tests/runtime/test_stop_cluster.py)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv

from slurmgen import run_history

from .test_local_run import FAST, clean_env, logs_of, slurmgen_run, workdir

SLOW = FAST.replace("]", ', --step-time, "0.05"]')  # 300 steps of 0.05 s: a periodic save at step 100


def wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        assert proc.poll() is None and time.monotonic() < deadline, f"{pattern!r} never appeared:\n{text[-3000:]}"
        time.sleep(0.2)


def finish(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)


@pytest.mark.slow
@pytest.mark.torch
def test_a_clean_stop_keeps_the_state_and_a_local_resume_continues_from_it(tmp_path: Path) -> None:
    cwd = workdir(tmp_path)
    proc = slurmgen_run(cwd, "jobs/cpu-debug.yaml", "-N", "1", "--set", SLOW, stderr=cwd / "runner.err")
    err = wait_for(cwd / "runner.err", r"local-(\d+): cpu-debug", proc)
    job = re.findall(r"local-(\d+): cpu-debug", err)[0]
    rank0 = cwd / "logs" / f"cpu-debug-{job}" / "rank-0.log"
    wait_for(rank0, r"saved state to \S+ \(.*periodic\)", proc)
    sent = run_slurmgen("run", "--local", "--job", job, "--signal", "USR2", cwd=cwd, env=clean_env())
    assert sent.returncode == 0, sent.stderr
    assert finish(proc) == 0, logs_of(cwd)
    err = (cwd / "runner.err").read_text()
    assert f"local-{job}: COMPLETED, exit code 0, 1 run in" in err  # a clean stop is what was asked for
    batch_log = (cwd / "logs" / f"cpu-debug-{job}.log").read_text()
    assert f"job {job} stopped before its work was done (clean-exit): its resume state is kept" in batch_log
    (state,) = cwd.rglob(f"{job}.state")
    end = [e for e in run_history.read(str(cwd / "logs" / f"cpu-debug-{job}")) if e["event"] == "run-end"]
    assert [e["ended"] for e in end] == ["stopped"]
    # The resume: the job itself comes back (its id, logs and run history continue) from its last periodic save.
    with open(cwd / "resume.err", "wb") as resume_err:
        again = subprocess.Popen(slurmgen_argv("resume", f"local-{job}"), cwd=cwd, env=clean_env(), stderr=resume_err)
    assert finish(again) == 0, logs_of(cwd) + (cwd / "resume.err").read_text()
    log = rank0.read_text()
    assert re.search(r"rank 0/2: start at step [1-9]\d* on \S+, run 2", log), log[-3000:]
    assert "resumed weights" in log and "done after 300 steps" in log
    end = [e for e in run_history.read(str(cwd / "logs" / f"cpu-debug-{job}")) if e["event"] == "run-end"]
    assert [e["ended"] for e in end] == ["stopped", "completed"]
    assert not state.exists()  # the resumed job completed: its state is removed


def test_the_runs_end_outlives_a_sigterm_sent_as_its_interpreter_starts(tmp_path: Path) -> None:
    """Slurm's SIGTERM at the end of a grace time reaches every process of the job, the run's end included. Sent
    before its interpreter could ignore it, it killed the end: no record of the run's end, no decision (CI lost
    a continuation job so on Slurm 24.11). The batch shell ignores TERM before it starts the end, and the end
    inherits that. A PATH wrapper named python3 sends itself SIGTERM just before it becomes the end's interpreter;
    a real local run (a program that needs no torch), whose end must then complete as without it."""
    cwd = workdir(tmp_path)
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    (wrappers / "python3").write_text(
        "#!/bin/bash\n"
        'if [ "$1 $2 $3" = "-m slurmgen.batch end" ]; then\n'
        "    kill -TERM $$\n"
        '    echo "wrapper: the end was sent SIGTERM and lives" >&2\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    (wrappers / "python3").chmod(0o755)
    quick = ["--set", "command=[python3, -c, 'print(\"done\")']", "--set", f"python={wrappers / 'python3'}"]
    with open(cwd / "runner.err", "wb") as err:  # the spec's python: the local runner puts its directory first
        proc = subprocess.Popen(slurmgen_argv("run", "--local", "jobs/cpu-debug.yaml", "-N", "1", *quick),
                                cwd=cwd, env=clean_env(), stderr=err)  # fmt: skip
    assert finish(proc) == 0, logs_of(cwd)
    job = re.findall(r"local-(\d+): COMPLETED, exit code 0, 1 run in", (cwd / "runner.err").read_text())
    assert len(job) == 1, logs_of(cwd)
    batch_log = (cwd / "logs" / f"cpu-debug-{job[0]}.log").read_text()
    assert "wrapper: the end was sent SIGTERM and lives" in batch_log
    end = [e for e in run_history.read(str(cwd / "logs" / f"cpu-debug-{job[0]}")) if e["event"] == "run-end"]
    assert [(e["exit_code"], e["ended"]) for e in end] == [(0, "completed")], logs_of(cwd)
