"""requeue, cancel and --wait decisions on recorded `scontrol show job` records: what is done to which id, what is
refused and why, and which exit code a finished job gives."""

from __future__ import annotations

import pytest
from fake_slurm import FakeSlurm
from recorded import recorded_text

from slurmgen.errors import SchedulerError, UsageError
from slurmgen.queries.control import plan_cancel, plan_requeue, requeue_job, signal_route
from slurmgen.queries.wait import follow, outcome
from slurmgen.signal_names import require_signal_name as signal_name
from slurmgen.slurm.client import InvalidJobId, JobPending, RequeueDisabled
from slurmgen.slurm.ids import JobId
from slurmgen.slurm.showjob import JobInfo, job_info, parse_show_job


def infos(name: str, **changes: str) -> list[JobInfo]:
    return [job_info({**rec, **changes}) for rec in parse_show_job(recorded_text(f"{name}.out"))]


# --- requeue --------------------------------------------------------------------------------------------------


def test_requeue_a_running_job_explains_what_happens() -> None:
    step = plan_requeue(JobId(7), infos("show-job-o-running"), hold=False, finished=False)
    assert step.target == "7"
    assert step.message.startswith("requeueing 7: job 7 is RUNNING on node[2-3]")
    assert "SIGTERM" in step.message and "run 2 (SLURM_RESTART_COUNT=1)" in step.message
    held = plan_requeue(JobId(7), infos("show-job-o-running"), hold=True, finished=False)
    assert "holds it until `scontrol release 7`" in held.message


@pytest.mark.parametrize(
    ("recording", "error", "message"),
    [
        ("show-job-o-pending", JobPending, "is PENDING.*nothing to requeue"),
        ("show-job-o-held", JobPending, "JobHeldUser"),
        ("show-job-o-requeued", JobPending, "BeginTime"),  # a second requeue right after one
        ("show-job-o-requeue-completing", JobPending, "COMPLETING"),
        ("show-job-o-norequeue", RequeueDisabled, "--no-requeue"),
        ("show-job-o-completed", UsageError, "already ended \\(COMPLETED, exit 0:0\\).*--finished"),
        ("show-job-o-failed", UsageError, "already ended \\(FAILED, exit 3:0\\)"),
    ],
)
def test_requeue_refuses_what_makes_no_sense(recording: str, error: type[Exception], message: str) -> None:
    records = infos(recording)
    with pytest.raises(error, match=message):
        plan_requeue(records[0].job_id, records, hold=False, finished=False)


def test_requeue_of_a_finished_job_when_asked() -> None:
    step = plan_requeue(JobId(14), infos("show-job-o-completed"), hold=False, finished=True)
    assert step.target == "14" and "SIGTERM" not in step.message


def test_requeue_names_one_array_task() -> None:
    records = infos("show-job-o-array")
    with pytest.raises(UsageError, match=r"job 11 is an array \(11_\[3-5%2\], 11_2, 11_1\).*e\.g\. 11_2"):
        plan_requeue(JobId(11), records, hold=False, finished=False)
    step = plan_requeue(JobId(11, array_task=2), records, hold=False, finished=False)
    assert step.target == "11_2" and step.info.raw_id == 13
    with pytest.raises(InvalidJobId):
        plan_requeue(JobId(11, array_task=9), records, hold=False, finished=False)
    with pytest.raises(InvalidJobId, match="Slurm does not know job 5"):
        plan_requeue(JobId(5), [], hold=False, finished=False)


def test_requeue_of_a_het_component_requeues_the_whole_het_job() -> None:
    records = infos("handwritten-show-job-o-het")
    step = plan_requeue(JobId(123, het_offset=1), records, hold=False, finished=False)
    assert step.target == "123" and "all its components together" in step.message
    assert str(step.info.job_id) == "123+1"


def test_requeue_sends_the_task_id_to_scontrol() -> None:
    fake = FakeSlurm().on("scontrol", "--oneliner", "show", "job", "11_2", recording="show-job-o-array-task")
    fake.on("scontrol", "requeuehold", "11_2", recording="requeuehold-running")
    requeue_job(fake.client(), JobId(11, array_task=2), hold=True, finished=False)
    assert fake.calls[-1].argv == ["scontrol", "requeuehold", "11_2"]


# --- cancel ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "name"), [("USR2", "USR2"), ("sigusr1", "USR1"), ("SIGTERM", "TERM"), ("12", "USR2")])
def test_signal_names(text: str, name: str) -> None:
    assert signal_name(text) == name


@pytest.mark.parametrize("text", ["", "NOPE", "999", "USR2 --full", "-9"])
def test_bad_signal_names(text: str) -> None:
    with pytest.raises(UsageError):
        signal_name(text)


def test_signal_route() -> None:
    ours = infos("show-job-o-running", Comment="mine slurmgen:20261121-1")[0]
    theirs = infos("show-job-o-running")[0]
    assert signal_route("USR2", ours)[0] == "batch"
    assert signal_route("TERM", ours)[0] == "batch"
    assert signal_route("HUP", ours)[0] == "steps"  # not trapped unless it is the preemption signal
    assert signal_route("HUP", ours, trapped=["HUP"])[0] == "batch"
    assert signal_route("USR2", theirs)[0] == "steps"  # another tool's job: its batch shell may not trap it


def test_plan_cancel() -> None:
    assert plan_cancel(JobId(14), infos("show-job-o-completed"), None, None) is None  # ended: nothing to do
    with pytest.raises(UsageError, match="nobody to signal"):
        plan_cancel(JobId(14), infos("show-job-o-completed"), "USR2", None)
    for recording, state in [
        ("show-job-o-pending", "PENDING"),
        ("show-job-o-held", "PENDING"),
        ("show-job-o-requeue-completing", "COMPLETING"),
    ]:
        # Nobody runs to receive it, and scancel would block retrying: refused at once, with what to do.
        with pytest.raises(JobPending, match=rf"is {state}: no task runs to receive SIGUSR2 .* slurmgen cancel"):
            plan_cancel(JobId(8), infos(recording), "USR2", "steps")
    assert plan_cancel(JobId(8), infos("show-job-o-pending"), None, None) is not None  # a plain cancel is fine
    step = plan_cancel(JobId(11, array_task=2), infos("show-job-o-array"), None, None)
    assert step is not None and step.target == "11_2"


# --- --wait ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recording", "code", "message"),
    [
        ("show-job-o-completed", 0, "job 14 COMPLETED"),
        ("show-job-o-failed", 3, "job 15 FAILED with exit code 3"),
        ("show-job-o-cancelled", 143, "job 10 CANCELLED, ended by signal 15"),
        ("show-job-o-timeout", 143, "job 2 TIMEOUT, ended by signal 15"),
        ("show-job-o-special-exit", 1, None),
    ],
)
def test_outcome(recording: str, code: int, message: str | None) -> None:
    records = infos(recording)
    if not records[0].state.is_terminal:
        assert recording == "show-job-o-special-exit"  # held, not finished: --wait goes on
        return
    result = outcome(records)
    assert (result.exit_code, result.message) == (code, message)


def test_outcome_without_a_code_is_still_a_failure() -> None:
    node_fail = infos("show-job-o-completed", JobState="NODE_FAIL", Reason="NodeDown")
    assert outcome(node_fail).exit_code == 1 and "NODE_FAIL" in outcome(node_fail).message


def walking_through(*states: str) -> FakeSlurm:
    """`scontrol show job` answers with one recorded state per call; "gone": Slurm no longer knows the job."""
    names = ["show-job-invalid" if state == "gone" else state for state in states]
    return FakeSlurm().on("scontrol", "--oneliner", "show", "job", recording=names)


def test_wait_follows_a_requeue_to_the_end() -> None:
    # a requeued job passes COMPLETING and PENDING again; only the final state ends the wait
    run = walking_through("show-job-o-running", "show-job-o-requeue-completing", "show-job-o-requeued",
                          "show-job-o-running", "show-job-o-failed")  # fmt: skip
    seen: list[str] = []
    slept: list[float] = []
    result = follow(run.client(), JobId(17), lambda i: seen.append(i[0].state_name), sleep=slept.append)
    assert seen == ["RUNNING", "COMPLETING", "PENDING", "RUNNING", "FAILED"]
    assert result.exit_code == 3 and len(slept) == 4


def test_wait_for_a_job_slurm_forgets_is_an_error() -> None:
    run = walking_through("show-job-o-running", "gone")
    with pytest.raises(SchedulerError, match="no longer knows it"):
        follow(run.client(), JobId(7), lambda i: None, sleep=lambda s: None)
