"""The job commands end to end in-process, with stand-in Slurm commands on PATH that replay recorded output:
what goes to stdout and stderr, exit codes, and that nothing is created when it must not be."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm
from recorded import recorded_text

from slurmgen import run_history

from .cli_setup import install_fake, run


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm()
    for command in ("sbatch", "scontrol", "squeue", "scancel"):
        fake.on(command)  # silent success until a test says otherwise
    return install_fake(fake, tmp_path, monkeypatch)


def test_submit_prints_the_job_id_alone(fake: FakeSlurm, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fake.on("sbatch", out=recorded_text("handwritten-sbatch-banner.out"))
    monkeypatch.setenv("SBATCH_TIMELIMIT", "1")  # would silently override the script's --time
    monkeypatch.setenv("SLURM_JOB_ID", "5")  # left over from an enclosing allocation
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/other.conf")
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (0, "4567\n")
    assert "submitted job 4567" in err
    (call,) = fake.lines()
    assert call.startswith("sbatch --parsable --comment=slurmgen:") and call.endswith("/job.sbatch")
    env = fake.env_of("sbatch")
    assert "SBATCH_TIMELIMIT" not in env and "SLURM_JOB_ID" not in env
    assert env["SLURM_CONF"] == "/etc/slurm/other.conf"


def test_dry_run_prints_the_real_script_and_command_and_touches_nothing(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rendered, _ = run(capsys, "render", "tiny.yaml")
    assert code == 0
    code, out, err = run(capsys, "submit", "tiny.yaml", "--dry-run")
    assert (code, out) == (0, rendered)
    assert "would run: sbatch --parsable --comment=slurmgen:" in err and "would create " in err
    assert fake.lines() == [] and sorted(p.name for p in Path.cwd().iterdir()) == ["tiny.yaml"]


def test_sbatch_missing_is_one_line_and_exit_4(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    os.unlink(fake.bin_dir / "sbatch")
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (4, "")
    assert err.count("\n") == 1 and err.startswith("error: sbatch not found") and "--dry-run" in err
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["tiny.yaml"]


def test_sbatch_failure_is_its_message_not_a_traceback(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", err="sbatch: error: Batch job submission failed: Invalid account\n", rc=1)
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (3, "")
    assert err == "error: sbatch failed (exit 1): Batch job submission failed: Invalid account\n"


def test_unwritable_output_fails_before_sbatch(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    Path("afile").write_text("")
    code, out, err = run(capsys, "submit", "tiny.yaml", "--set", "output=afile/logs")
    assert (code, out) == (2, "")
    assert err.startswith("error: tiny.yaml: output: cannot write to ") and "Not a directory" in err
    assert fake.lines() == []


def test_test_only_reports_without_submitting(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", err=recorded_text("sbatch-test-only.err"))
    code, out, _ = run(capsys, "submit", "tiny.yaml", "--test-only")
    assert code == 0 and out.startswith("job tiny can run: it would start at ") and "on node1" in out
    fake.on("sbatch", err=recorded_text("sbatch-test-only-too-large.err"), rc=1)
    code, out, err = run(capsys, "submit", "tiny.yaml", "--test-only", "--set", "nodes=4")
    assert (code, out) == (3, "")
    assert "cannot run on this cluster" in err and "Requested node configuration is not available" in err
    assert not Path(".slurmgen").exists()


def test_wait_exits_with_the_jobs_exit_code(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", out="15\n")
    fake.on("scontrol", out=recorded_text("show-job-o-failed.out"))  # FAILED, ExitCode=3:0
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait")
    assert (code, out) == (3, "15\njob=15 state=FAILED exit=3\n")
    assert "slurmgen: job 15 FAILED with exit code 3" in err


def test_wait_names_the_task_that_failed_first(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    """The batch shell recorded which task failed first (run-end event): --wait and status say the same."""
    fake.on("sbatch", out="15\n")
    fake.on("scontrol", out=recorded_text("show-job-o-failed.out"))
    logs = Path("logs") / "tiny-15"
    failing = "rank 1 on node2 (exit 3)"
    run_history.append(str(logs), "batch-shell", run_history.RUN_END, 1, 1.0, exit_code=3, failing=failing)
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait")
    assert (code, out.splitlines()[-1]) == (3, 'job=15 state=FAILED exit=3 failing="rank 1 on node2 (exit 3)"')
    assert "job 15 FAILED with exit code 3; rank 1 on node2 (exit 3) failed first" in err
    code, out, _ = run(capsys, "status", "15")
    header, row = out.splitlines()
    assert "FAILED FIRST" in header and " 3     rank 1 on node2 (exit 3)  " in row


def test_wait_tells_slurmgens_own_failure_from_the_jobs(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    """A job that exits 3 and sbatch failing (3 without --wait) must not look alike: slurmgen's own is 125."""
    fake.on("sbatch", err="sbatch: error: Batch job submission failed: Invalid account\n", rc=1)
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait")
    assert (code, out) == (125, "job=- state=ERROR exit=125\n")
    assert err.startswith("error: sbatch failed (exit 1): Batch job submission failed: Invalid account\n")
    fake.on("sbatch", out="15\n")
    fake.on("scontrol", err="slurm_load_jobs error: Invalid job id specified\n", rc=1)  # Slurm forgot it
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait", "--set", "nodes=1")
    assert (code, out) == (125, "15\njob=15 state=ERROR exit=125\n")
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait", "--set", "nodes=0")
    assert (code, out) == (125, "job=- state=ERROR exit=125\n") and "error: --set: nodes: must be at least 1" in err


def test_status_of_the_journal_and_of_one_job(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", out="15\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    fake.on("scontrol", out=recorded_text("show-job-o-failed.out"))
    for argv in (("status",), ("status", "15"), ("status", "tiny.yaml"), ("status", "tiny")):
        code, out, _ = run(capsys, *argv)
        header, row = out.splitlines()
        assert code == 0 and header.split()[:3] == ["JOB", "NAME", "STATE"], argv
        assert row.split()[:3] == ["15", "bad", "FAILED"]  # the recorded job's name
    fake.on("scontrol", err="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    code, out, _ = run(capsys, "status")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["15", "tiny", "gone"]  # from the journal
    # `15;rm` is Slurm's own spelling of job 15 of cluster rm (sbatch --parsable -M rm); a command is no id
    code, out, err = run(capsys, "status", "15;rm -rf ~")
    assert code == 2 and "not a Slurm job id" in err


def test_requeue_refuses_a_whole_array(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("scontrol", out=recorded_text("show-job-o-array.out"))
    code, _, err = run(capsys, "requeue", "11")
    assert code == 2 and "would requeue every task" in err and "e.g. 11_2" in err
    assert fake.lines() == ["scontrol --oneliner show job 11"]


def test_logs_prints_every_file_with_its_name(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", out="15\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    fake.on("scontrol", out=recorded_text("show-job-o-failed.out"))
    Path("logs/tiny-15").mkdir()
    Path("logs/tiny-15.log").write_text("slurmgen: job 15, run 1\nslurmgen: job 15, run 2\n")
    Path("logs/tiny-15/node2.log").write_text("rank 2\n")
    Path("logs/tiny-15/node1.log").write_text("rank 0\n")
    code, out, _ = run(capsys, "logs", "15")
    assert code == 0
    assert out == (
        "==> logs/tiny-15.log <==\nslurmgen: job 15, run 1\nslurmgen: job 15, run 2\n\n"
        "==> logs/tiny-15/node1.log <==\nrank 0\n\n==> logs/tiny-15/node2.log <==\nrank 2\n"
    )
    code, out, _ = run(capsys, "logs", "tiny", "--node", "node2")
    assert (code, out) == (0, "==> logs/tiny-15/node2.log <==\nrank 2\n")
    code, out, err = run(capsys, "logs", "15", "--node", "node3")
    assert code == 2 and "nodes with logs: node1, node2" in err


def test_cancel_with_a_signal_goes_through_the_batch_shell_of_a_slurmgen_job(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    record = recorded_text("show-job-o-running.out")
    fake.on("scontrol", out=record.rstrip("\n") + " Comment=slurmgen:T\n")
    code, _, err = run(capsys, "cancel", "7", "--signal", "SIGUSR2")
    assert code == 0 and "sending SIGUSR2 to 7 (batch:" in err
    assert fake.lines()[-1] == "scancel --signal=USR2 --batch 7"
    code, _, _ = run(capsys, "cancel", "7", "--signal", "INT")  # not trapped by the script: to the steps
    assert code == 0 and fake.lines()[-1] == "scancel --signal=INT 7"
    code, _, _ = run(capsys, "cancel", "7", "--signal", "USR2", "--to", "all")
    assert code == 0 and fake.lines()[-1] == "scancel --signal=USR2 --full 7"
    code, _, _ = run(capsys, "cancel", "7")
    assert code == 0 and fake.lines()[-1] == "scancel 7"
    code, _, err = run(capsys, "cancel", "7", "--signal", "NOPE")
    assert code == 2 and "not a signal name" in err


def test_no_traceback_anywhere_when_slurm_is_missing(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.rmtree(fake.bin_dir)
    for argv in (("status", "12"), ("requeue", "12"), ("cancel", "12"), ("logs", "12")):
        code, _, err = run(capsys, *argv)
        assert code == 4 and err.startswith("error: scontrol: command not found"), argv


def test_status_survives_a_corrupt_journal(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", out="15\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    journal = Path(".slurmgen/journal.jsonl")
    with journal.open("ab") as f:
        f.write(b'"just a string"\n\xff\xfe not utf-8\n')
    fake.on("scontrol", err="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    code, out, err = run(capsys, "status")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["15", "tiny", "gone"]
    assert err.splitlines() == [
        f"warning: {journal.absolute()}: skipped line 3 (a JSON str, not an object) and 1 more; "
        "the other entries are read"
    ]
    journal.unlink()
    journal.mkdir()
    code, out, err = run(capsys, "status")
    assert (code, out) == (1, "")
    assert err == f"error: {journal.absolute()}: " + (
        "is a directory, not the journal; move it away (the journal is a file)\n"
    )
