"""`slurmgen doctor`'s report from recorded and hand-written `scontrol show config` / `show partition` output,
a spec's facts and the last save of its job (the CLI end to end: tests/cli/test_cli_site.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from history_events import T0, write_three_runs
from recorded import recorded_text

from slurmgen.doctor import site as doctor
from slurmgen.errors import UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.queries.history import LastSave, WindowMiss
from slurmgen.slurm import site

SITE = site.parse_config(recorded_text("handwritten-show-config-22.05-user-signal.out"))  # JobRequeue=0, KillWait 30
PARTS = site.parse_partitions(recorded_text("handwritten-show-partition-o-preempt.out"))
SPEC = doctor.SpecFacts("jobs/x.yaml", "x", "low-cancel", 300, "USR1", 3600)
SAVE = LastSave("15", 2, 58.5, 3 << 30, 2.0, WindowMiss("preemption", 60.5, 60.0, "GraceTime 30 s + KillWait 30 s"))


def risk_lines(text: str) -> list[str]:
    return [line.strip().removeprefix("risk").strip() for line in text.splitlines() if line.strip().startswith("risk ")]


def test_the_specs_partition_its_lead_time_and_last_save() -> None:
    report = doctor.build_report(SITE, PARTS, SPEC, SAVE)
    (part,) = report.partitions
    assert part.plan.partition == "low-cancel" and part.preemptors == ("high",)
    assert dict(part.plan.windows) == {"preemption": 60.0, "time-limit": 300.0}
    text = doctor.render(report)
    assert "  spec         jobs/x.yaml: job x, lead time 300 s (--signal=B:USR1@300), time limit 01:00:00" in text
    assert "  last save    58.5 s + a step of 2.0 s, 3.0 GiB (job 15, run 2)" in text
    assert "  user signal  on: the --signal signal reaches the batch shell at preemption " in text
    assert "(SlurmctldParameters=preempt_send_user_signal)" in text
    assert "  GraceTime    30 s (Slurm acts on its end within about 30 s more)" in text
    risks = risk_lines(text)
    assert [r.split(":")[0] for r in risks] == ["PreemptMode=CANCEL", "SIGKILL mid-save", "JobRequeue=0"]
    assert "the last save (58.5 s) plus a step (2.0 s) does not fit the 60 s window" in risks[1]
    assert all("; fix: " in r for r in risks)


def test_the_default_partition_when_the_spec_names_none() -> None:
    report = doctor.build_report(SITE, PARTS, replace(SPEC, partition=None), None)
    assert [p.plan.partition for p in report.partitions] == ["debug"]
    text = doctor.render(report)
    assert "partition debug (default)\n  mode         OFF: its jobs are not preempted (PreemptMode=OFF)" in text
    assert "  last save    none recorded" in text


def test_a_partition_the_cluster_does_not_have() -> None:
    with pytest.raises(
        UsageError,
        match=r"^jobs/x.yaml: partition: 'gpu' is not a partition of this cluster \(it has debug, high, low,",
    ):
        doctor.build_report(SITE, PARTS, replace(SPEC, partition="gpu"), None)


def test_every_partition_without_a_spec_and_shared_risks_once() -> None:
    report = doctor.build_report(SITE, PARTS, None, None)
    assert [p.plan.partition for p in report.partitions] == [p.name for p in PARTS]
    text = doctor.render(report)
    assert text.count("JobRequeue=0: Slurm requeues only the jobs that ask for it") == 1
    blocks = {b.split("\n")[0]: b for b in text.split("\n\n")}
    assert "  risks        only the cluster's (above)" in blocks["partition high"]
    assert "  preempted by high" in blocks["partition low"]
    assert (
        "GraceTime" not in blocks["partition scavenger"] and "SUSPEND: Slurm suspends" in blocks["partition scavenger"]
    )
    assert "spec " not in text and "last save" not in text


def test_the_recorded_cluster_and_its_default_partition() -> None:
    conf = site.parse_config(recorded_text("show-config.out"))
    text = doctor.render(
        doctor.build_report(conf, site.parse_partitions(recorded_text("show-partition-o.out")), None, None)
    )
    assert text.startswith("Slurm 22.05.8: what preemption and the time limit do to a job here\n")
    debug = text.split("\n\n")[1]
    assert debug.startswith(
        "partition debug (default)\n  mode         OFF: its jobs are not preempted (PreemptMode=OFF)"
    )
    assert "  windows      none: nothing signals its jobs before they end\n  risks        none found" in debug
    assert "partition low-cancel-grace\n  mode         CANCEL: Slurm cancels a preempted job" in text


def test_qos_preemption_says_where_the_grace_is() -> None:
    qos = replace(SITE, preempt_type="preempt/qos", preempt_mode="REQUEUE")
    text = doctor.render(doctor.build_report(qos, PARTS, replace(SPEC, partition="debug"), None))
    assert "  GraceTime    from the job's QOS (unknown here; assumed 0)" in text
    assert "sacctmgr show qos" in text


def test_the_last_save_of_the_specs_last_job(tmp_path: Path) -> None:
    journal = Journal(tmp_path / ".slurmgen")
    spec = tmp_path / "x.yaml"
    for job in ("14", "15"):
        journal.append(Entry("submitted", job, "x", str(spec), "r", "r/job.sbatch", T0, job, log_dir=str(tmp_path)))
    assert doctor.spec_last_save(journal, spec) is None  # job 15 has no history yet
    write_three_runs(tmp_path / "x-14", last_save=20.0)
    assert doctor.spec_last_save(journal, spec) is None  # only the last job counts
    write_three_runs(tmp_path / "x-15", last_save=70.0)
    found = doctor.spec_last_save(journal, spec)
    assert found is not None and (found.key, found.run, found.seconds) == ("15", 2, 70.0)
    assert doctor.spec_last_save(journal, tmp_path / "other.yaml") is None


def test_a_hang_timeout_shorter_than_the_measured_save_is_a_risk() -> None:
    short = replace(SPEC, hang_timeout=45)
    risks = risk_lines(doctor.render(doctor.build_report(SITE, PARTS, short, SAVE)))
    assert risks[0] == (
        "recovery.hang_timeout 45 s is not longer than the measured save of 58.5 s (job 15, run 2): a healthy save "
        "would be taken for a hang; fix: raise recovery.hang_timeout above 177 s"
    )
    assert doctor.hang_risk(replace(SPEC, hang_timeout=1800), SAVE) is None
    assert doctor.hang_risk(short, None) is None  # nothing measured yet


def test_the_requeue_delay_and_an_expedite_the_site_does_not_allow() -> None:
    """The requeue row on 22.05 (AuthInfo=cred_expire=5 of the harness) and 25.11 (requeue_delay=30), and
    recovery.expedite as one risk line where the site cannot give it."""
    old = doctor.render(doctor.build_report(SITE, PARTS, replace(SPEC, expedite=True), None))
    assert ("  requeue      a requeued run may start 5 s after the requeue (AuthInfo=cred_expire=5); expedited "
            "requeue not allowed here\n") in old  # fmt: skip
    (line,) = [r for r in risk_lines(old) if "expedite" in r]
    assert line.startswith("jobs/x.yaml: recovery.expedite: Slurm 22.05.8 has no expedited requeue")
    assert line.endswith("; fix: remove recovery.expedite, or ask the admins to enable it")
    new = site.parse_config(recorded_text("handwritten-show-config-25.11-expedite.out"))
    text = doctor.render(doctor.build_report(new, PARTS, replace(SPEC, expedite=True), None))
    assert "(SchedulerParameters=requeue_delay=30); expedited requeue allowed (enable_expedited_requeue)" in text
    assert not [r for r in risk_lines(text) if "expedite" in r]
    assert not [r for r in risk_lines(doctor.render(doctor.build_report(SITE, PARTS, SPEC, None))) if "expedite" in r]
