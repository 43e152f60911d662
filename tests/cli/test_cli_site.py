"""`slurmgen doctor`, `slurmgen history` and status's save-window warning end to end in-process, with stand-in
Slurm commands on PATH that replay recorded output, and run histories written by hand (run_history.append)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm
from history_events import T0, write_three_runs
from recorded import DATA, SLURM_DATA

from slurmgen.queries.status import when

from .cli_setup import install_fake, run

CONFIG = ("scontrol", "show", "config")
PARTITIONS = ("scontrol", "-o", "show", "partition")


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm()
    return install_fake(fake, tmp_path, monkeypatch)


def submitted(fake: FakeSlurm, capsys: pytest.CaptureFixture[str], job: str = "15") -> Path:
    """Submit tiny.yaml as job ``job``; its own log directory (where its run history goes)."""
    fake.on("sbatch", out=f"{job}\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    return Path.cwd() / "logs" / f"tiny-{job}"


def preempting_cluster(fake: FakeSlurm) -> None:
    fake.on(*CONFIG, out=(SLURM_DATA / "handwritten-show-config-23.02-user-signal.out").read_text())
    fake.on(*PARTITIONS, out=(SLURM_DATA / "handwritten-show-partition-o-preempt.out").read_text())


# --- doctor ---------------------------------------------------------------------------------------------------


def test_doctor_without_a_spec_shows_every_partition(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on(*CONFIG, recording="show-config").on(*PARTITIONS, recording="show-partition-o")
    code, out, err = run(capsys, "doctor")
    assert (code, err) == (0, "")
    assert out.startswith("Slurm 22.05.8: what preemption and the time limit do to a job here\n")
    assert "  KillWait     5 s from SIGTERM to SIGKILL\n  JobRequeue   1\n" in out
    assert "partition debug (default)\n  mode         OFF: its jobs are not preempted (PreemptMode=OFF)" in out
    assert out.count("\npartition ") == 6  # the test cluster's debug, high and four low-* partitions
    assert fake.lines() == ["scontrol show config", "scontrol -o show partition"]  # no accounting database


def test_doctor_of_a_spec_with_its_last_save(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    write_three_runs(submitted(fake, capsys), last_save=58.0)  # 58 s + a 4 s step
    preempting_cluster(fake)
    code, out, err = run(capsys, "doctor", "tiny.yaml", "--set", "partition=low-cancel")
    assert (code, err) == (0, "")
    assert "  user signal  on: the --signal signal reaches the batch shell at preemption " in out
    assert "(PreemptParameters=send_user_signal)" in out  # the 23.02 spelling
    assert "  spec         tiny.yaml: job tiny, lead time 75 s (--signal=B:USR1@75), time limit 00:05:00" in out
    assert "  last save    58.0 s + a step of 4.0 s, 2.0 GiB (job 15, run 2)" in out
    assert "partition low-cancel\n  mode         CANCEL: Slurm cancels a preempted job\n" in out
    risks = [line for line in out.splitlines() if line.startswith("  risk ")]
    assert [r.split(":")[0].split()[-1] for r in risks] == ["PreemptMode=CANCEL", "mid-save", "limit"]
    # the grace asked for is what the measured 62 s stop needs with 30 s of headroom, less KillWait (30 s)
    assert risks[0].endswith("fix: ask your admins for PreemptMode=REQUEUE and GraceTime >= 62 on partition low-cancel")
    assert "preemption: the last save (58.0 s) plus a step (4.0 s) does not fit the 60 s window" in risks[1]
    assert "a lead time of 75 s is near the 300 s time limit" in risks[2]


def test_doctor_with_no_slurm_here_is_one_line_and_exit_4(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    os.unlink(fake.bin_dir / "scontrol")
    code, out, err = run(capsys, "doctor")
    assert (code, out) == (4, "")
    assert err == "error: scontrol: command not found (is the Slurm client installed and on PATH?)\n"
    fake.install(fake.bin_dir)
    fake.on(*CONFIG, recording="show-config-no-controller")
    code, out, err = run(capsys, "doctor")
    assert (code, out, err.count("\n")) == (4, "", 1)
    assert err.startswith("error: scontrol show config: no Slurm controller reachable from here")


def test_doctor_of_a_spec_without_slurm_says_what_the_spec_alone_shows(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    """The doctor without a Slurm client here: the lead time against the limit and the last save, and the hang
    timeout against the save, need only the spec and its run history; the rest is listed as needing the cluster."""
    write_three_runs(submitted(fake, capsys), last_save=80.0)  # 80 s + a 4 s step: more than the 75 s lead time
    os.unlink(fake.bin_dir / "scontrol")
    code, out, err = run(capsys, "doctor", "tiny.yaml", "--set", "recovery.hang_timeout=60")
    assert (code, err) == (0, ""), err
    assert out.startswith("No Slurm cluster answers here (scontrol: command not found")
    assert "  spec         tiny.yaml: job tiny, lead time 75 s (--signal=B:USR1@75), time limit 00:05:00" in out
    risks = [line for line in out.splitlines() if line.startswith("  risk ")]
    assert "a lead time of 75 s is near the 300 s time limit" in risks[0]
    assert "the last save of 80.0 s plus a step of 4.0 s does not fit the 75 s lead time" in risks[1]
    assert "raise preemption.lead_time to at least 114 s" in risks[1]
    assert "recovery.hang_timeout 60 s is not longer than the measured save of 80.0 s" in risks[2]
    assert len(risks) == 3
    assert "Needs the cluster (run slurmgen doctor where scontrol works):" in out
    assert "(GraceTime and KillWait)" in out


def test_doctor_of_a_spec_whose_partition_is_not_there(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    preempting_cluster(fake)
    code, out, err = run(capsys, "doctor", "tiny.yaml", "--set", "partition=gpu")
    assert (code, out) == (2, "")
    assert err == (
        "error: tiny.yaml: partition: 'gpu' is not a partition of this cluster (it has debug, high, low, low-grace, "
        "low-cancel, scavenger)\n"
    )


# --- history ---------------------------------------------------------------------------------------------------


def test_history_of_a_job_that_left_the_queue(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    write_three_runs(submitted(fake, capsys))
    for job in ("15", "tiny", "tiny.yaml"):
        code, out, err = run(capsys, "history", job)
        assert (code, err) == (0, "")
        header, *rows = out.splitlines()
        assert header.split()[:3] == ["RUN", "START", "END"] and "REQUEUED BY" in header
        assert [r.split()[0] for r in rows] == ["1", "2", "3"]
        assert "preemption (REQUEUE)  Slurm" in rows[0] and "12.5 s  1.5 GiB" in rows[0]
        assert "time-limit            rank 0" in rows[1] and "50.0 s  2.0 GiB" in rows[1]
    assert fake.commands("scontrol") == []  # the journal knew the job: Slurm was not asked


def test_history_of_a_job_not_submitted_from_here(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = (DATA / "show-job-o-running.out").read_text()
    batch_log = tmp_path / "elsewhere" / "train-7.log"
    record = record.replace("StdOut=/tmp/slurmgen-record/dir with space/out 7.log", f"StdOut={batch_log}")
    fake.on("scontrol", out=record)
    write_three_runs(batch_log.with_suffix(""))
    code, out, _ = run(capsys, "history", "7")
    assert code == 0 and len(out.splitlines()) == 4
    assert fake.lines() == ["scontrol --oneliner show job 7"]


def test_a_job_without_history_is_one_line_and_exit_2(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = submitted(fake, capsys)
    code, out, err = run(capsys, "history", "15")
    assert (code, out) == (2, "")
    assert err == (
        f"error: job 15: no run history (looked in {log_dir}/history/); a job records its runs once its first run "
        "has started, if it was submitted by slurmgen\n"
    )


# --- status ------------------------------------------------------------------------------------------------------


def test_status_warns_once_when_the_last_save_does_not_fit(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    write_three_runs(submitted(fake, capsys), last_save=70.0)  # + a 4 s step > the 60 s lead time
    fake.on("scontrol", out=(DATA / "show-job-o-completed.out").read_text())
    code, out, err = run(capsys, "status")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["JOB", "NAME", "STATE"]
    assert err == (
        "warning: job 15: its last save took 70.0 s plus a step of 4.0 s (run 2), more than the 60 s time-limit "
        "window (the --signal lead time): it would be killed mid-save; see slurmgen doctor\n"
    )
    write_three_runs(Path.cwd() / "logs" / "tiny-16", last_save=10.0)
    fake.on("sbatch", out="16\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    assert run(capsys, "status", "16")[2] == ""  # its save fits


def test_status_shows_the_requeues_and_the_step_restarts_apart(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    """RESTARTS once showed Slurm's count (requeues) as 0 for a job whose step was restarted twice
    inside its allocation; the run history's restarts now have their own column."""
    from slurmgen import run_history

    log_dir = str(submitted(fake, capsys))
    write_three_runs(Path(log_dir))
    for at in (10, 20):
        run_history.append(log_dir, "batch-shell", run_history.RESTART, 1, T0 + at, cause="crash", rank=1)
    fake.on("scontrol", out=(DATA / "show-job-o-completed.out").read_text())
    code, out, _ = run(capsys, "status")
    head, row = out.splitlines()[:2]
    assert code == 0 and "REQUEUES  STEP RESTARTS" in head, out
    assert row[head.index("STEP RESTARTS") :].split()[0] == "2", out
    assert row[head.index("REQUEUES") :].split()[0] == "0", out


def test_history_times_are_local_clock_times(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    write_three_runs(submitted(fake, capsys))
    first = run(capsys, "history", "15")[1].splitlines()[1]
    assert f"1    {when(T0, time.time())}  {when(T0 + 131, time.time())}  node[1-2]" in first
