"""`slurmgen resume`: requeue a finished job Slurm still knows; submit the script of a forgotten one again, from its
state; refuse a job that has not ended. Recorded scontrol answers, FakeSlurm for the commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm

from slurmgen import contract, run_history
from slurmgen.errors import UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.queries.resume import resume
from slurmgen.slurm.ids import JobId
from slurmgen.submission.targets import Target

SHOW = ("scontrol", "--oneliner", "show", "job")


def journal_with_job(tmp_path: Path, job_id: str) -> tuple[Journal, Entry]:
    run_dir = tmp_path / ".slurmgen" / "runs" / "tiny" / "T1"
    run_dir.mkdir(parents=True)
    (run_dir / "job.sbatch").write_text("#!/bin/bash\n")
    (run_dir / "spec.resolved.json").write_text(json.dumps({"workdir": str(tmp_path / "work")}))
    journal = Journal(tmp_path / ".slurmgen")
    entry = Entry("submitted", "T1", "tiny", str(tmp_path / "tiny.yaml"), str(run_dir),
                  str(run_dir / "job.sbatch"), 1.0, job_id, log_dir=str(tmp_path / "work" / "logs"))  # fmt: skip
    journal.append(entry)
    return journal, entry


def test_a_finished_job_slurm_knows_is_requeued_with_its_id(tmp_path: Path) -> None:
    fake = FakeSlurm().on(*SHOW, "14", recording="show-job-o-completed").on("scontrol", "requeue", "14")
    journal, entry = journal_with_job(tmp_path, "14")
    job_logs = str(tmp_path / "work" / "logs" / "tiny-14")  # where its batch shell keeps the run history
    run_history.append(job_logs, "batch-shell", run_history.RUN_START, 1, 1.0)
    step, new = resume(fake.client(), Target(JobId(14), entry), journal)
    assert (step.how, new) == ("requeue", None)
    assert fake.commands("scontrol")[-1] == ["scontrol", "requeue", "14"]  # not Incomplete: it has ended
    assert "resumes from its last saved state" in step.message
    # Credited to the command, before the next run would take it for an admin's; no cause: no budget is used.
    assert [(r.requeued_by, r.cause) for r in run_history.runs(run_history.read(job_logs))] == [("resume", None)]


def test_a_forgotten_job_is_submitted_again_from_its_state(tmp_path: Path) -> None:
    fake = FakeSlurm().on(*SHOW, "14", recording="show-job-invalid").on("sbatch", out="15\n")
    journal, entry = journal_with_job(tmp_path, "14")
    step, new = resume(fake.client(env={}), Target(JobId(14), entry), journal)
    assert (step.how, new) == ("resubmit", JobId(15))
    (argv,) = fake.commands("sbatch")
    assert argv[:3] == ["sbatch", "--parsable", f"--chdir={tmp_path / 'work'}"]
    assert argv[3] == f"--export=ALL,{contract.RESUME_FROM}=14"
    assert argv[4].startswith("--comment=slurmgen:") and argv[5] == entry.script
    latest = journal.jobs()[-1]
    assert (latest.job_id, latest.extra, latest.log_dir) == ("15", {"resumes": "14"}, entry.log_dir)


def test_a_forgotten_jobs_arguments_are_in_the_script_submitted_again_and_kept_in_the_journal(tmp_path: Path) -> None:
    """`slurmgen submit SPEC -- ARGS`: the words are in the run directory's script, which the resume submits as it
    is (no render again), and the new job's journal entry keeps them for history."""
    from dataclasses import replace

    fake = FakeSlurm().on(*SHOW, "14", recording="show-job-invalid").on("sbatch", out="15\n")
    journal, entry = journal_with_job(tmp_path, "14")
    given = ["--lr", "3e-4", "two words"]
    Path(entry.script).write_text("#!/bin/bash\n'python' 't.py' '--lr' '3e-4' 'two words' &\n")
    entry = replace(entry, extra={"args": given})
    resume(fake.client(env={}), Target(JobId(14), entry), journal)
    (argv,) = fake.commands("sbatch")
    assert argv[-1] == entry.script and "'two words' &" in Path(argv[-1]).read_text()
    latest = journal.jobs()[-1]
    assert (latest.job_id, latest.args, latest.extra["resumes"]) == ("15", tuple(given), "14")


@pytest.mark.parametrize("recording", ["show-job-o-running", "show-job-o-pending"])
def test_a_job_that_has_not_ended_has_nothing_to_resume(tmp_path: Path, recording: str) -> None:
    fake = FakeSlurm().on(*SHOW, recording=recording)
    journal, entry = journal_with_job(tmp_path, "7")
    with pytest.raises(UsageError, match="it has not ended, so there is nothing to resume"):
        resume(fake.client(), Target(JobId(7), entry), journal)
    assert fake.commands("sbatch") == []


def test_a_forgotten_job_from_elsewhere_cannot_be_resubmitted(tmp_path: Path) -> None:
    fake = FakeSlurm().on(*SHOW, recording="show-job-invalid")
    with pytest.raises(UsageError, match="not submitted from here"):
        resume(fake.client(), Target(JobId(99), None), Journal(tmp_path / ".slurmgen"))
