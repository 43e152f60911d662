"""The batch shell's decisions (slurmgen.batch) against a slurmctld stand-in that keeps one job's state:
which preemption gets which requeue, by whom, within which budget, and what the run history records.

The real cluster runs the same code in tests/runtime/test_preemption_cluster.py; here every configuration is
checked in milliseconds, including the ones that need a preemption partition."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm, done
from recorded import recorded_text

from slurmgen import contract, run_history
from slurmgen.batch import commands as batch
from slurmgen.batch import signals as batch_signal
from slurmgen.job_context.context import JobContext
from slurmgen.slurm.client import SlurmClient

PREEMPT_TIME = "2026-11-23T10:00:00"


@dataclass
class OneJob:
    """slurmctld as one job 77 sees it: its state, restarts and PreemptTime; requeues change them as Slurm's
    _job_requeue_op does (Incomplete acts only on a running job; a plain requeue takes a completing one too)."""

    state: str = "RUNNING"
    restarts: int = 0
    preempt_time: str | None = None
    requeue_disabled: bool = False
    requeues: list[list[str]] = field(default_factory=list)
    signalled: list[list[str]] = field(default_factory=list)  # scancel --signal calls
    srun_pid: int = 4242  # the step's srun, as `scontrol show step` reports it
    submitted: list[list[str]] = field(default_factory=list)  # sbatch calls (continuation jobs): job 88, 89, ...
    sbatch_down: bool = False  # every sbatch fails as a controller that does not answer
    updates: list[list[str]] = field(default_factory=list)  # scontrol update calls

    def answer(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        if argv[0] == "scancel":
            self.signalled.append(argv)
            return done()
        if argv[1:4] == ["--oneliner", "show", "step"]:
            return done(
                "StepId=77.batch UserId=0 State=RUNNING SrunHost:Pid=(null):0\n"
                f"StepId=77.0 UserId=0 State=RUNNING SrunHost:Pid=node1:{self.srun_pid}\n"
            )
        if argv[1:4] == ["--oneliner", "show", "job"]:
            record = (
                f"JobId=77 JobName=t JobState={self.state} Reason=None Requeue=1 Restarts={self.restarts} "
                f"ExitCode=0:0 PreemptTime={self.preempt_time or 'None'} Partition=low"
            )
            return done(record + "\n")
        if argv[1:] == ["show", "config"]:
            return done(recorded_text("show-config.out"))
        if argv[1:4] == ["-o", "show", "partition"]:
            return done(recorded_text("show-partition-o.out"))
        if argv[1] == "update":
            self.updates.append(argv)
            return done()
        if argv[1] == "requeue":
            self.requeues.append(argv)
            if self.requeue_disabled:
                return done(stderr="scontrol: error: Requested operation is presently disabled for job 77\n", rc=1)
            incomplete = argv[2] == "Incomplete"
            if self.state == "PENDING":
                return done(stderr="scontrol: error: Job is pending execution for job 77\n", rc=1)
            if incomplete and self.state != "RUNNING":
                return done()  # a silent no-op: the job is not running
            self.state, self.restarts = "COMPLETING", self.restarts + 1
            return done()
        raise AssertionError(f"unexpected: {argv}")

    def client(self) -> SlurmClient:
        fake = FakeSlurm().on("scontrol", answer=self.answer).on("scancel", answer=self.answer)
        return fake.on("sbatch", answer=self.submit).client()

    def submit(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        if self.sbatch_down:
            return done(stderr="sbatch: error: Batch job submission failed: Socket timed out on send/recv\n", rc=1)
        self.submitted.append(argv)
        return done(f"{88 + len(self.submitted) - 1}\n")


def env_for(tmp_path: Path, *, restarts: int = 0, **extra: str) -> dict[str, str]:
    env = {
        "SLURM_JOB_ID": "77",
        contract.LOG_DIR: str(tmp_path / "logs"),
        contract.STATE_DIR: str(tmp_path / "state"),
        contract.PREEMPT_SIGNAL: "USR1",
        contract.MAX_REQUEUES: "2",
        "SLURM_JOB_NODELIST": "node[1-2]",
        **extra,
    }
    if restarts:
        env["SLURM_RESTART_COUNT"] = str(restarts)
    return env


def history(tmp_path: Path) -> list[run_history.Run]:
    return run_history.runs(run_history.read(str(tmp_path / "logs")))


def test_grace_time_preemption_that_reached_only_the_tasks_is_requeued_after_the_step(tmp_path: Path) -> None:
    """REQUEUE, GraceTime > 0, no user signal: the tasks got SIGTERM, saved and exited; the job still RUNS with
    PreemptTime set. Left alone it would end FAILED, never requeued; the batch shell requeues it at once."""
    job = OneJob(preempt_time=PREEMPT_TIME)
    said: list[str] = []
    code = batch.end(143, JobContext.from_environ(env_for(tmp_path)), said.append, job.client())
    assert code == 0 and job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]
    assert said == ["preempted: requeue issued for job 77 (preemption; preemption 1 of no limit)"]
    (run,) = history(tmp_path)
    assert (run.cause, run.requeued_by, run.exit_code) == ("preemption", "batch-shell", 143)


@pytest.mark.parametrize(("version", "requeues"), [("22.05.8", True), ("24.11.5", False), ("26.05.5", False)])
def test_since_24_05_slurm_requeues_a_job_that_ends_in_its_grace(tmp_path: Path, version: str, requeues: bool) -> None:
    """Slurm 24.05 and later requeue a job of a REQUEUE partition that ends during its grace time (src/slurmctld/
    proc_req.c); a requeue of ours would leave Slurm's grace mark on the job and its next run would be requeued
    again as it completes (seen on 24.11). So the batch shell leaves it to Slurm there, and requeues before."""
    site = {"mode": "REQUEUE", "grace": 10, "version": version}
    run_history.append(str(tmp_path / "logs"), "batch-shell", run_history.RUN_START, 1, 1.0, site=site)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "77.state").write_bytes(b"x")
    job = OneJob(preempt_time=PREEMPT_TIME)
    said: list[str] = []
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, job.client()) == 0
    assert job.requeues == ([["scontrol", "requeue", "Incomplete", "77"]] if requeues else [])
    if not requeues:
        assert said == ["preempted in its grace time (PreemptMode=REQUEUE): Slurm requeues the job as it ends"]
    assert [e["requeued"] for e in run_history.read(str(tmp_path / "logs")) if e["event"] == "run-end"] == [True]
    assert (tmp_path / "state" / "77.state").exists()  # the next run resumes from it


def test_cancel_preemption_is_requeued_by_the_signal_step_at_once(tmp_path: Path) -> None:
    """CANCEL: Slurm never requeues; at the SIGTERM the job is COMPLETING with PreemptTime set. A plain requeue
    takes it back before the save has ended, so even a save cut short by SIGKILL leaves the job queued."""
    job = OneJob(state="COMPLETING", preempt_time=PREEMPT_TIME)
    said: list[str] = []
    assert (
        batch_signal.on_signal("TERM", None, JobContext.from_environ(env_for(tmp_path)), said.append, job.client()) == 0
    )
    assert job.requeues == [["scontrol", "requeue", "77"]]
    assert said == [
        "preempted with PreemptMode=CANCEL: requeue issued for job 77 (preemption; preemption 1 of no limit)"
    ]
    # After the step, the job is requeued already (by the batch shell): nothing more, nothing credited to Slurm.
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, job.client()) == 0
    assert len(job.requeues) == 1
    (run,) = history(tmp_path)
    assert (run.cause, run.mode, run.requeued_by) == ("preemption", "CANCEL", "batch-shell")


def graced_cancel_site(tmp_path: Path, version: str = "24.11.5") -> dict[str, str]:
    """A run that started in a PreemptMode=CANCEL partition with a grace time, on ``version``; its state saved."""
    site = {"mode": "CANCEL", "grace": 10, "version": version}
    run_history.append(str(tmp_path / "logs"), "batch-shell", run_history.RUN_START, 1, 1.0, site=site)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "77.state").write_bytes(b"x")
    script = tmp_path / "slurm_script"
    script.write_text("#!/bin/bash\n")
    return env_for(tmp_path, SLURMGEN_BATCH_SCRIPT=str(script))


def test_a_graced_cancel_whose_grace_ends_before_the_runs_end_is_continued_at_the_term(tmp_path: Path) -> None:
    """CANCEL with a grace time on 24.05+: the grace ended (slurmctld's SIGTERM to every process) before the run's
    end had decided; that end may die of the TERM or of the SIGKILL after KillWait. The SIGTERM step submits the
    continuation job at once, not a plain requeue (the requeued run would end PREEMPTED whatever it did: seen on
    24.11 in CI, where the job ended PREEMPTED, never continued). The run's end, if it gets there, makes no
    second one and keeps the state."""
    env = graced_cancel_site(tmp_path)
    job = OneJob(state="COMPLETING", preempt_time=PREEMPT_TIME)
    said: list[str] = []
    assert batch_signal.on_signal("TERM", None, JobContext.from_environ(env), said.append, job.client()) == 0
    assert job.requeues == [] and len(job.submitted) == 1
    assert "--dependency=afterany:77" in job.submitted[0] and f"--export=ALL,{contract.RESUME_FROM}=77" in \
        job.submitted[0]  # fmt: skip
    assert said == ["preempted with PreemptMode=CANCEL: submitted job 88 to continue job 77 from its state "
                    "(preemption; a requeue would end PREEMPTED on this Slurm whatever the run does)"]  # fmt: skip
    job.state = "PREEMPTED"
    assert batch.end(0, JobContext.from_environ(env), said.append, job.client()) == 0
    assert len(job.submitted) == 1 and job.requeues == []
    (run,) = history(tmp_path)
    assert (run.cause, run.continued_as, run.requeued_by) == ("preemption", "88", None)
    assert [e["requeued"] for e in run_history.read(str(tmp_path / "logs")) if e["event"] == "run-end"] == [True]
    assert (tmp_path / "state" / "77.state").exists()  # the continuation resumes from it


def test_a_graced_cancel_end_and_term_at_once_make_one_continuation(tmp_path: Path) -> None:
    """The run's end and the SIGTERM step can overlap (the TERM just before the end began): each reads a history
    without the other's continuation. The first to claim the run submits; the other says so and keeps the state."""
    env = graced_cancel_site(tmp_path)
    job = OneJob(state="RUNNING", preempt_time=PREEMPT_TIME)
    said: list[str] = []
    (tmp_path / "logs" / ".continuation-run1").write_bytes(b"")  # the other one's claim, its record not yet written
    assert batch.end(0, JobContext.from_environ(env), said.append, job.client()) == 0
    assert job.submitted == [] and job.requeues == []
    assert said[-1].endswith("the continuation of run 1 is submitted by the batch shell already")
    assert (tmp_path / "state" / "77.state").exists()


def test_a_continuation_the_term_step_could_not_submit_is_tried_again_by_the_runs_end(tmp_path: Path) -> None:
    """sbatch fails at the SIGTERM (the controller busy): that step frees its claim and says so, the state stays;
    the run's end, if it still gets there, tries again and the work goes on in one new job."""
    env = graced_cancel_site(tmp_path)
    job = OneJob(state="COMPLETING", preempt_time=PREEMPT_TIME, sbatch_down=True)
    said: list[str] = []
    assert batch_signal.on_signal("TERM", None, JobContext.from_environ(env), said.append, job.client()) == 0
    assert job.submitted == [] and "could not submit a continuation of job 77" in said[-1]
    assert not (tmp_path / "logs" / ".continuation-run1").exists()
    job.state, job.sbatch_down = "PREEMPTED", False
    assert batch.end(0, JobContext.from_environ(env), said.append, job.client()) == 0
    assert len(job.submitted) == 1 and job.requeues == []
    (run,) = history(tmp_path)
    assert run.continued_as == "88" and (tmp_path / "state" / "77.state").exists()


def test_before_24_05_a_graced_cancel_is_requeued_at_the_term(tmp_path: Path) -> None:
    """22.05 ends a requeued CANCEL+grace run as its run does: the SIGTERM step's plain requeue stays right."""
    env = graced_cancel_site(tmp_path, "22.05.8")
    job = OneJob(state="COMPLETING", preempt_time=PREEMPT_TIME)
    said: list[str] = []
    assert batch_signal.on_signal("TERM", None, JobContext.from_environ(env), said.append, job.client()) == 0
    assert job.requeues == [["scontrol", "requeue", "77"]] and job.submitted == []


def test_slurms_own_requeue_is_recorded_as_slurms_never_made_twice(tmp_path: Path) -> None:
    """REQUEUE without grace: Slurm requeued the job itself (Restarts one higher, PreemptTime still set while it
    completes). The batch shell makes no second requeue and records who did it."""
    job = OneJob(state="COMPLETING", restarts=1, preempt_time=PREEMPT_TIME)
    assert (
        batch_signal.on_signal(
            "TERM", None, JobContext.from_environ(env_for(tmp_path)), lambda line: None, job.client()
        )
        == 0
    )
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), lambda line: None, job.client()) == 0
    assert job.requeues == []
    (run,) = history(tmp_path)
    assert (run.cause, run.mode, run.requeued_by) == ("preemption", "REQUEUE", "slurm")


def test_a_requeue_rank_0_made_is_not_credited_to_slurm(tmp_path: Path) -> None:
    """The user signal at preemption: rank 0 saved and requeued; Slurm's TERM for that requeue reaches the batch
    shell too. One requeue, credited to rank 0."""
    run_history.append(str(tmp_path / "logs"), "rank0", run_history.REQUEUE, 1, 1.0, cause="preemption")
    job = OneJob(state="COMPLETING", restarts=1, preempt_time=PREEMPT_TIME)
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), lambda line: None, job.client()) == 0
    assert job.requeues == []
    assert [(r.requeued_by, r.cause) for r in history(tmp_path)] == [("rank0", "preemption")]


def test_a_user_cancel_is_never_requeued(tmp_path: Path) -> None:
    job = OneJob(state="COMPLETING")  # scancel: TERM, no PreemptTime
    assert (
        batch_signal.on_signal(
            "TERM", None, JobContext.from_environ(env_for(tmp_path)), lambda line: None, job.client()
        )
        == 0
    )
    assert (
        batch.end(
            143, JobContext.from_environ(env_for(tmp_path, SLURMGEN_SIGNALS="TERM@1")), lambda line: None, job.client()
        )
        == 143
    )
    assert job.requeues == []
    (run,) = history(tmp_path)
    assert (run.requeued_by, run.signals, run.exit_code) == (None, ["TERM"], 143)


def test_the_next_run_records_what_slurm_did_when_no_one_could(tmp_path: Path) -> None:
    """Run 1 was preempted and requeued by Slurm, and its batch shell was killed before it could record it; run
    2's begin records it (a preemption: run 1 saw PreemptTime), and an unexplained one as external."""
    logs = str(tmp_path / "logs")
    run_history.append(logs, "batch-shell", run_history.PREEMPTED, 1, 1.0, mode="REQUEUE")
    said: list[str] = []
    batch.begin(JobContext.from_environ(env_for(tmp_path, restarts=2)), said.append, OneJob().client())
    runs = history(tmp_path)
    assert [(r.run, r.requeued_by, r.cause) for r in runs] == [
        (1, "slurm", "preemption"),
        (2, "slurm", "external"),
        (3, None, None),
    ]
    assert runs[-1].nodes == "node[1-2]" and runs[-1].start is not None
    assert said == [
        "run 1 was requeued after a preemption",
        "run 2 was requeued by Slurm or an admin (scontrol requeue, a node failure)",
    ]
    counts = run_history.counts(runs)
    assert (counts.own, counts.preemptions, counts.external) == (0, 1, 1)  # neither costs the job's own budget


@pytest.mark.parametrize(("signals", "requeued"), [("", True), ("USR2@5.0", False)])
def test_requeue_on_failure_within_the_budget(tmp_path: Path, signals: str, requeued: bool) -> None:
    job = OneJob()
    env = env_for(tmp_path)
    env |= {contract.REQUEUE_ON_FAILURE: "1", contract.SIGNALS: signals}
    code = batch.end(3, JobContext.from_environ(env), lambda line: None, job.client())
    assert (code, len(job.requeues)) == ((0, 1) if requeued else (3, 0))


def test_the_jobs_own_budget_stops_a_loop_of_failures(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    for run in (1, 2):
        run_history.append(logs, "batch-shell", run_history.REQUEUE, run, 1.0, cause="failure")
    job = OneJob(restarts=2)
    said: list[str] = []
    env = env_for(tmp_path, restarts=2) | {contract.REQUEUE_ON_FAILURE: "1"}
    assert batch.end(3, JobContext.from_environ(env), said.append, job.client()) == 3
    assert job.requeues == []
    assert said == ["not requeueing job 77 (failure): its requeue budget is used up (2 of 2, preemption.max_requeues)"]


def test_a_task_inside_a_container_asks_through_the_marker(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    marker = tmp_path / "state" / contract.requeue_marker_name("77")
    marker.write_text("time-limit\n")
    job = OneJob()
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), lambda line: None, job.client()) == 0
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]] and not marker.exists()
    (run,) = history(tmp_path)
    assert (run.cause, run.requeued_by) == ("time-limit", "batch-shell")


def test_the_batch_shell_of_a_container_job_requeues_itself(tmp_path: Path) -> None:
    """The script exports SLURMGEN_CONTAINER=1 for its tasks, and the batch shell's helper sees it too; it runs
    outside the image all the same, so it requeues with scontrol instead of leaving itself another marker (found
    by the first job that ran in a real container: tests/runtime/test_apptainer_cluster.py)."""
    (tmp_path / "state").mkdir()
    marker = tmp_path / "state" / contract.requeue_marker_name("77")
    marker.write_text("requested\n")
    job, said = OneJob(), list[str]()
    assert (
        batch.end(0, JobContext.from_environ(env_for(tmp_path) | {contract.CONTAINER: "1"}), said.append, job.client())
        == 0
    )
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]] and not marker.exists(), said
    (run,) = history(tmp_path)
    assert (run.cause, run.requeued_by) == ("requested", "batch-shell")


def test_a_task_that_could_not_ask_slurm_is_corrected_by_slurms_answer(tmp_path: Path) -> None:
    """Without scontrol a task takes any requeue signal for a preemption; Slurm shows no PreemptTime, so the batch
    shell requeues it as the request it was (counted against max_requeues, not max_preemptions)."""
    (tmp_path / "state").mkdir()
    marker = tmp_path / "state" / contract.requeue_marker_name("77")
    marker.write_text("preemption\n")
    job, said = OneJob(), list[str]()
    assert (
        batch.end(0, JobContext.from_environ(env_for(tmp_path, SLURMGEN_MAX_REQUEUES="3")), said.append, job.client())
        == 0
    )
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]
    assert said == ["requeue issued for job 77 (requested; requeue 1 of 3)"]
    (run,) = history(tmp_path)
    assert (run.cause, run.requeued_by) == ("requested", "batch-shell")


def test_a_job_without_requeue_says_so(tmp_path: Path) -> None:
    job = OneJob(preempt_time=PREEMPT_TIME, requeue_disabled=True)
    said: list[str] = []
    assert batch.end(143, JobContext.from_environ(env_for(tmp_path)), said.append, job.client()) == 143
    assert said == ["preempted: job 77 was submitted with --no-requeue; not requeued"]
    assert history(tmp_path)[0].refused == "disabled"


def test_the_helper_never_breaks_the_batch_shell(tmp_path: Path) -> None:
    """An error in the helper is one line, and `end` still exits with the step's code."""
    env = {"SLURM_JOB_ID": "77", contract.LOG_DIR: str(tmp_path / "not-a-dir")}
    (tmp_path / "not-a-dir").write_text("a file where the log directory should be")
    assert batch.main(["end", "5"], env) == 5
    assert batch.main(["nonsense"], env) == 2


def test_the_start_records_the_site_and_warns_when_the_last_save_does_not_fit(tmp_path: Path) -> None:
    """The run-start event carries what this site's Slurm does (for history and status); a last save that would
    not fit the coming stop's window is said once, at the start of the next run."""
    logs = str(tmp_path / "logs")
    run_history.append(logs, "rank0", run_history.STOP, 1, 1.0, cause="time-limit", step_seconds=2.0)
    run_history.append(logs, "rank0", run_history.SAVE, 1, 2.0, seconds=40.0, bytes=1, cause="time-limit")
    said: list[str] = []
    env = env_for(tmp_path, restarts=1) | {contract.LEAD_TIME: "30", "SLURM_JOB_PARTITION": "debug"}
    batch.begin(JobContext.from_environ(env), said.append, OneJob().client())
    start = next(e for e in run_history.read(logs) if e["event"] == run_history.RUN_START)
    assert start["site"]["partition"] == "debug" and start["site"]["windows"]["time-limit"] == 30
    assert said[-1].startswith("warning: the last save may not fit its window: time-limit: the last save (40.0 s)")


# --- the preemption signal by preemption.handler, SIGTERM, and the end of a run -----------------------------------


@dataclass
class Kills:
    """os.kill for the batch helper: records the signals it sends (to srun); pid 0 checks see a finished step."""

    sent: list[tuple[int, int]] = field(default_factory=list)
    alive: bool = False

    def __call__(self, pid: int, sig: int) -> None:
        if sig == 0 and not self.alive:
            raise ProcessLookupError(pid)
        if sig:
            self.sent.append((pid, sig))


def test_requeue_mode_stops_the_step_through_slurm_and_end_requeues(tmp_path: Path) -> None:
    """handler requeue: SIGTERM to the step's tasks through slurmstepd (scancel on our step, found by srun's pid),
    never to srun itself (it would SIGKILL them); `end` requeues with the cause, once."""
    job, kills, said = OneJob(), Kills(), list[str]()
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="requeue")
    assert (
        batch_signal.on_signal(
            "USR1", 4242, JobContext.from_environ(env), said.append, job.client(), kill=kills, sleep=lambda s: None
        )
        == 0
    )
    assert job.signalled == [["scancel", "--signal=TERM", "77.0"]] and kills.sent == []
    assert said == ["SIGUSR1 (requested): stopping the step with SIGTERM; the job is requeued once it has ended"]
    assert batch.end(143, JobContext.from_environ(env | {contract.SIGNALS: "USR1@5.0"}), said.append, job.client()) == 0
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]
    (run,) = history(tmp_path)
    assert (run.cause, run.requeued_by, run.exit_code) == ("requested", "batch-shell", 143)


def test_auto_falls_back_to_requeue_with_one_warning_unless_preemption_announced_itself(tmp_path: Path) -> None:
    """auto: the signal goes to the tasks at once (blocked there until Preemption exists); a program that has not
    constructed Preemption a quarter of the lead time later is stopped and requeued, with one warning."""
    job, kills, said = OneJob(), Kills(alive=True), list[str]()
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="auto", SLURMGEN_LEAD_TIME="120")
    ticks = iter(range(1000))
    ctx = JobContext.from_environ(env)
    batch_signal.on_signal("USR1", 4242, ctx, said.append, job.client(), kill=kills, sleep=lambda s: None,
                           clock=lambda: float(next(ticks)))  # fmt: skip
    assert kills.sent == [(4242, signal.SIGUSR1)]
    # the wait as it begins, in the batch log (not only on `slurmgen run`'s terminal), then the fallback's warning
    assert said[0].startswith("preemption.handler auto: the program has not constructed slurmgen's Preemption, so "
                              "the batch shell waits up to 30 s for it")  # fmt: skip
    assert said[1].startswith(
        "warning: the program did not construct slurmgen's Preemption within 30 s of SIGUSR1, so SIGUSR1 cannot"
    )
    assert "construct Preemption in the program" in said[1] and len(job.signalled) == 1
    kills.sent.clear()
    # Next run: rank 0 constructed Preemption (it records that): the signal goes to the tasks, as with runtime.
    again = env_for(tmp_path, restarts=1, SLURMGEN_PREEMPT_HANDLER="auto")
    run_history.append(str(tmp_path / "logs"), "rank0", run_history.HANDLER, 2, 1.0, handler="runtime")
    said.clear()
    batch_signal.on_signal("USR1", 4242, JobContext.from_environ(again), said.append, job.client(), kill=kills)
    assert kills.sent == [(4242, signal.SIGUSR1)] and said == [] and len(job.signalled) == 1


@pytest.mark.parametrize("handler", ["runtime", "program"])
def test_runtime_and_program_get_the_signal_forwarded(tmp_path: Path, handler: str) -> None:
    job, kills = OneJob(), Kills()
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER=handler)
    batch_signal.on_signal("USR1", 4242, JobContext.from_environ(env), lambda line: None, job.client(), kill=kills)
    assert kills.sent == [(4242, signal.SIGUSR1)] and job.signalled == []


def test_a_program_that_decides_is_never_requeued_by_the_batch_shell(tmp_path: Path) -> None:
    """handler program: even a preemption with a grace time left running is the program's business."""
    job = OneJob(preempt_time=PREEMPT_TIME)
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="program")
    assert batch.end(143, JobContext.from_environ(env), lambda line: None, job.client()) == 143
    assert job.requeues == []


def test_runtime_says_when_nothing_ever_took_the_signal(tmp_path: Path) -> None:
    said: list[str] = []
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="runtime", SLURMGEN_SIGNALS="USR1@3.0")
    batch.end(0, JobContext.from_environ(env), said.append, OneJob().client())
    assert said[0].startswith("warning: SIGUSR1 reached the job, but the program never constructed slurmgen's")


def test_term_goes_to_the_step_through_slurm_only_while_the_job_runs(tmp_path: Path) -> None:
    """`slurmgen cancel --signal TERM`: the job runs, the tasks get TERM from slurmstepd. Slurm ending the job
    (COMPLETING: time limit, scancel, requeue) signalled them itself: nothing more."""
    running, kills = OneJob(), Kills()
    batch_signal.on_signal(
        "TERM", 4242, JobContext.from_environ(env_for(tmp_path)), lambda line: None, running.client(), kill=kills
    )
    assert running.signalled == [["scancel", "--signal=TERM", "77.0"]]
    ending = OneJob(state="COMPLETING")
    batch_signal.on_signal(
        "TERM", 4242, JobContext.from_environ(env_for(tmp_path)), lambda line: None, ending.client(), kill=kills
    )
    assert ending.signalled == [] and kills.sent == []


def test_a_step_still_saving_at_the_end_of_its_window_is_requeued_then(tmp_path: Path) -> None:
    """The time limit's warning, requeue mode: the program takes too long to stop; 10 s before the limit the batch
    helper requeues the job itself, and Slurm stops the rest (SIGTERM, KillWait)."""
    job, kills, said = OneJob(), Kills(alive=True), list[str]()
    now = 1000.0
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="requeue", SLURMGEN_START_TIME=str(now - 590),
                  SLURMGEN_TIME_LIMIT="600", SLURMGEN_LEAD_TIME="60")  # fmt: skip
    clock = iter([now, now, now + 1, now + 2])
    ctx = JobContext.from_environ(env)
    batch_signal.on_signal("USR1", 4242, ctx, said.append, job.client(), kill=kills, sleep=lambda s: None,
                           clock=lambda: next(clock))  # fmt: skip
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]
    assert said[-1].startswith("the step is still stopping 10 s before the end of its window: requeue issued")
    assert history(tmp_path)[0].cause == "time-limit"


def test_the_job_exits_with_the_first_failing_tasks_own_code(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    (tmp_path / "rank-1.log").write_text("Traceback (most recent call last):\nValueError: boom\n")
    for rank, code, when in ((2, 76, 9.0), (1, 3, 8.0)):
        run_history.append(logs, f"task-{rank}", run_history.TASK_EXIT, 1, when, rank=rank, node="node1",
                           exit_code=code, log=str(tmp_path / f"rank-{rank}.log"))  # fmt: skip
    said: list[str] = []
    assert batch.end(143, JobContext.from_environ(env_for(tmp_path)), said.append, OneJob().client()) == 3
    assert said[0].startswith("rank 1 on node1 failed first: its program exited with code 3; the job exits 3")
    assert said[1:] == [f"its log: {tmp_path / 'rank-1.log'}; last lines:", "| Traceback (most recent call last):",
                        "| ValueError: boom"]  # fmt: skip
    end = next(e for e in run_history.read(logs) if e["event"] == run_history.RUN_END)
    assert (end["exit_code"], end["step_code"], end["failing"]) == (3, 143, "rank 1 on node1 (exit 3)")


def test_a_completed_jobs_state_is_removed_and_a_failed_jobs_kept(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    state = tmp_path / "state" / "77.state"
    state.write_bytes(b"x")
    said: list[str] = []
    assert batch.end(1, JobContext.from_environ(env_for(tmp_path)), said.append, OneJob().client()) == 1
    assert state.exists()
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, OneJob().client()) == 0
    assert not state.exists() and said[-1] == f"the job completed: removed its resume state {state}"
    assert run_history.read(str(tmp_path / "logs"))[-1]["event"] == run_history.STATE_REMOVED
    # Sharded checkpoints (directories, runtime/checkpoint/layout.py) and an interrupted one go too; others stay.
    for name in ("77.state.000003", "77.state.000004", ".77.state.000005.ab12cd34.tmp", "78.state.000001"):
        (tmp_path / "state" / name).mkdir()
    assert batch.end(0, JobContext.from_environ(env_for(tmp_path)), said.append, OneJob().client()) == 0
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["78.state.000001"]
    assert said[-1].endswith("77.state.000003 and 2 more")


def test_auto_requeues_a_program_that_ended_before_the_decision(tmp_path: Path) -> None:
    """auto: the step failed while the batch shell still waited for the program to construct Preemption (a shell
    wrapper that does not keep the signal blocked dies of it): the job comes back all the same."""
    job, said = OneJob(), list[str]()
    env = env_for(tmp_path, SLURMGEN_PREEMPT_HANDLER="auto", SLURMGEN_SIGNALS="USR1@5.0")
    assert batch.end(138, JobContext.from_environ(env), said.append, job.client()) == 0
    assert said[0].startswith("warning: the program did not construct slurmgen's Preemption, so SIGUSR1 cannot")
    assert job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]
    assert [(r.cause, r.requeued_by) for r in history(tmp_path)] == [("requested", "batch-shell")]


def test_the_run_start_carries_slurms_sluid_where_slurm_exports_one(tmp_path: Path) -> None:
    """SLURM_JOB_SLUID (src/common/env.c of 26.05) becomes the run's `sluid` and `history`'s SLUID column; a value
    that is not a SLUID is not recorded, and without the variable (22.05 to 25.11) the column is left out."""
    from slurmgen.queries import history as history_view

    batch.begin(JobContext.from_environ(env_for(tmp_path, SLURM_JOB_SLUID="s731M834YGW200")), print, OneJob().client())
    batch.begin(JobContext.from_environ(env_for(tmp_path, restarts=1, SLURM_JOB_SLUID="77")), print, OneJob().client())
    events = run_history.read(str(tmp_path / "logs"))
    starts = [e for e in events if e["event"] == run_history.RUN_START]
    assert [e.get("sluid") for e in starts] == ["s731M834YGW200", None] and "sluid" not in starts[1]
    assert [r.sluid for r in run_history.runs(events)] == ["s731M834YGW200", None]
    table = history_view.table(history_view.rows(events))
    assert table.splitlines()[0].split()[:2] == ["RUN", "SLUID"]
    assert table.splitlines()[1].split()[:2] == ["1", "s731M834YGW200"]
    without = tmp_path / "plain"
    batch.begin(JobContext.from_environ(env_for(without)), print, OneJob().client())
    plain = history_view.table(history_view.rows(run_history.read(str(without / "logs"))))
    assert "SLUID" not in plain and plain.startswith("RUN  START")


@pytest.mark.parametrize(("expedite", "requeue_on_failure", "cleared"), [("1", "", True), ("", "", False),
                                                                         ("1", "1", False)])  # fmt: skip
def test_an_expedited_job_that_ends_for_good_clears_its_requeue_flag(
    tmp_path: Path, expedite: str, requeue_on_failure: str, cleared: bool
) -> None:
    """recovery.expedite: a run that fails for good (not requeued) asks `scontrol update JobId=77 Requeue=0`, or
    Slurm would requeue the job and hold it; a run that is requeued, or a job without expedite, asks nothing."""
    job = OneJob()
    env = env_for(tmp_path) | {contract.EXPEDITE: expedite, contract.REQUEUE_ON_FAILURE: requeue_on_failure}
    said: list[str] = []
    code = batch.end(3, JobContext.from_environ(env), said.append, job.client())
    assert job.updates == ([["scontrol", "update", "JobId=77", "Requeue=0"]] if cleared else [])
    assert code == (0 if requeue_on_failure else 3)
    assert any("expedited requeue cleared" in line for line in said) == cleared
