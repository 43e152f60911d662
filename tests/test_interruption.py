"""The end-of-run decision (slurmgen.interruption) as a table: facts in, requeue and ending out, no processes.

The executors run the same decision with real processes: tests/batch/test_batch.py (the batch shell against a
slurmctld stand-in), tests/runtime/test_stop_faults.py (PATH-wrapped scontrol, signals at teardown) and the
cluster tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmgen import exit_codes, interruption
from slurmgen.interruption.ending import EndAction, EndFacts, RunRecord, Settle, SlurmSays

RUNNING = SlurmSays(running=True, preempted=False, requeued=False, mode=None, state_name="RUNNING")
PREEMPTED = replace(RUNNING, preempted=True)
CANCELLING = SlurmSays(running=False, preempted=True, requeued=False, mode="CANCEL", state_name="COMPLETING")
REQUEUED = SlurmSays(running=False, preempted=False, requeued=True, mode=None, state_name="COMPLETING")
BASE = EndFacts(
    step_code=0,
    job_code=0,
    program_decides=False,
    preemption_on=True,
    requeue_on_failure=False,
    signals=(),
    marker=None,
    slurm=RUNNING,
    run=RunRecord(),
    unanswered=False,
    signal_cause="requested",
)


def facts(**changes: object) -> EndFacts:
    return replace(BASE, **changes)  # type: ignore[arg-type]


# (name, facts, the plan's (requeue, cause), the requeue's outcome, (ended, code, removes the state))
ROWS = [
    ("the work is done", facts(), (None, None), None, ("completed", 0, True)),
    ("failed on its own", facts(step_code=1, job_code=3), (None, None), None, ("failed", 3, False)),
    # Slurm could not be asked (timed out) but rank 0 recorded its requeue: requeued, state kept.
    (
        "rank 0's requeue, Slurm unknown",
        facts(slurm=None, run=RunRecord(stop="preemption", requeued_by="rank0")),
        (None, None),
        None,
        ("requeued", 0, False),
    ),
    # Uncertainty keeps the state: exit 0, no stop, but Slurm could not be asked.
    ("Slurm unknown", facts(slurm=None), (None, None), None, ("unsure", 0, False)),
    # A clean stop (USR2) or a user's own signal with preemption off: stopped, the state kept, exit 0.
    ("USR2", facts(signals=("USR2",), run=RunRecord(stop="clean-exit")), (None, None), None, ("stopped", 0, False)),
    (
        "own signal, preemption off",
        facts(preemption_on=False, run=RunRecord(stop="clean-exit")),
        (None, None),
        None,
        ("stopped", 0, False),
    ),
    (
        "TERM",
        facts(step_code=143, job_code=143, run=RunRecord(stop="terminated")),
        (None, None),
        None,
        ("failed", 143, False),
    ),
    # Grace-time preemption no rank handled: the batch shell requeues the running job.
    ("preempted, grace", facts(slurm=PREEMPTED), ("running", "preemption"), "requeued", ("requeued", 0, False)),
    ("preempted, CANCEL", facts(slurm=CANCELLING), ("ended", "preemption"), "requeued", ("requeued", 0, False)),
    # The requeue failed after its retries: the state stays and the job does not pass for completed.
    (
        "requeue failed",
        facts(slurm=PREEMPTED),
        ("running", "preemption"),
        "failed",
        ("stopped", exit_codes.EXIT_REQUEUE_BUDGET, False),
    ),
    (
        "budget spent",
        facts(marker="time-limit"),
        ("running", "time-limit"),
        "budget",
        ("stopped", exit_codes.EXIT_REQUEUE_BUDGET, False),
    ),
    (
        "--no-requeue",
        facts(slurm=PREEMPTED, step_code=143, job_code=143),
        ("running", "preemption"),
        "disabled",
        ("failed", 143, False),
    ),
    # The preemption came after the program had finished: no requeue, the job completed.
    (
        "preempted after the work was done",
        facts(slurm=PREEMPTED, signals=("USR1",), run=RunRecord(announced=True, finished=True)),
        (None, None),
        None,
        ("completed", 0, True),
    ),
    # handler auto, an unmodified program (no Preemption, so no finish recorded) that ended 0 during auto's wait
    # for it: it ended on its own, the job completed in this run (it was requeued for a second run doing nothing).
    (
        "auto: an unmodified program ended 0 during the wait",
        facts(slurm=PREEMPTED, signals=("USR1",), ended_in_wait=True),
        (None, None),
        None,
        ("completed", 0, True),
    ),
    # ... not when the wait was over (or none began: a TERM that reached only the tasks, a grace's end)
    (
        "auto: an unmodified program ended 0, not in the wait",
        facts(slurm=PREEMPTED, signals=("USR1",)),
        ("running", "preemption"),
        "requeued",
        ("requeued", 0, False),
    ),
    # ... not once the batch shell stopped it (the wait was over), nor after Slurm's TERM (the grace's end).
    (
        "auto: stopped by the batch shell",
        facts(slurm=PREEMPTED, signals=("USR1",), ended_in_wait=True, run=RunRecord(batch_stop="preemption")),
        ("running", "preemption"),
        "requeued",
        ("requeued", 0, False),
    ),
    (
        "auto: ended 0 after Slurm's TERM",
        facts(slurm=PREEMPTED, signals=("USR1", "TERM"), ended_in_wait=True),
        ("running", "preemption"),
        "requeued",
        ("requeued", 0, False),
    ),
    # ... but not when a stop was agreed first, or the program failed.
    (
        "finished but stopped",
        facts(slurm=PREEMPTED, run=RunRecord(finished=True, stop="preemption")),
        ("running", "preemption"),
        "requeued",
        ("requeued", 0, False),
    ),
    # ... nor where Slurm requeues the job as it ends in its grace time anyway (24.05+): then the state stays.
    (
        "finished, but Slurm requeues in grace",
        facts(slurm=PREEMPTED, run=RunRecord(finished=True, slurm_requeues_in_grace=True)),
        (None, None),
        None,
        ("requeued", 0, False),
    ),
    ("Slurm requeued it", facts(slurm=REQUEUED), (None, None), None, ("requeued", 0, False)),
    (
        "Slurm requeues in grace",
        facts(slurm=PREEMPTED, run=RunRecord(slurm_requeues_in_grace=True)),
        (None, None),
        None,
        ("requeued", 0, False),
    ),
    ("a task's marker", facts(marker="time-limit"), ("running", "time-limit"), "requeued", ("requeued", 0, False)),
    (
        "marker without scontrol in the task",
        facts(marker="preemption"),
        ("running", "requested"),
        "requeued",
        ("requeued", 0, False),
    ),
    (
        "batch shell's stop",
        facts(step_code=143, job_code=143, run=RunRecord(batch_stop="time-limit")),
        ("running", "time-limit"),
        "budget",
        ("stopped", exit_codes.EXIT_REQUEUE_BUDGET, False),
    ),
    (
        "failure, requeue_on_failure",
        facts(step_code=3, job_code=3, requeue_on_failure=True),
        ("running", "failure"),
        "requeued",
        ("requeued", 0, False),
    ),
    (
        "failure after a signal",
        facts(step_code=3, job_code=3, requeue_on_failure=True, signals=("USR2",)),
        (None, None),
        None,
        ("failed", 3, False),
    ),
    (
        "program decides",
        facts(slurm=PREEMPTED, program_decides=True, run=RunRecord(stop="preemption")),
        (None, None),
        None,
        ("stopped", 0, False),
    ),
    # CANCEL with a grace time on 24.05+: a requeued run would end PREEMPTED even after all the work; a new job
    # continues from the state instead (batch/continuation.py), rank 0 having left it to the batch shell.
    (
        "CANCEL+grace 24.05+, rank 0 saved and left it to the batch shell",
        facts(slurm=PREEMPTED, marker="preemption", run=RunRecord(stop="preemption", continue_elsewhere=True)),
        ("continue", "preemption"),
        "continued",
        ("requeued", 0, False),
    ),
    (
        "CANCEL+grace 24.05+, no rank handled it, Slurm ending the job",
        facts(slurm=CANCELLING, run=RunRecord(continue_elsewhere=True)),
        ("continue", "preemption"),
        "continued",
        ("requeued", 0, False),
    ),
    (
        "CANCEL+grace 24.05+, Slurm unknown, rank 0's marker",
        facts(slurm=None, marker="preemption", run=RunRecord(continue_elsewhere=True)),
        ("continue", "preemption"),
        "continued",
        ("requeued", 0, False),
    ),
    (
        "CANCEL+grace 24.05+, the continuation could not be submitted: the state stays",
        facts(slurm=PREEMPTED, run=RunRecord(continue_elsewhere=True)),
        ("continue", "preemption"),
        "failed",
        ("stopped", exit_codes.EXIT_REQUEUE_BUDGET, False),
    ),
    (
        "CANCEL+grace 24.05+, but the program had finished: nothing to continue",
        facts(slurm=PREEMPTED, run=RunRecord(finished=True, continue_elsewhere=True)),
        (None, None),
        None,
        ("completed", 0, True),
    ),
]


@pytest.mark.parametrize(("name", "given", "planned", "outcome", "ended"), ROWS, ids=[row[0] for row in ROWS])
def test_end_of_run(
    name: str,
    given: EndFacts,
    planned: tuple[str | None, str | None],
    outcome: str | None,
    ended: tuple[str, int, bool],
) -> None:
    plan = interruption.decide(given)
    assert (plan.requeue, plan.cause) == planned
    ending = interruption.decide(Settle(given, plan, outcome, "77"))
    assert (ending.ended, ending.code, ending.remove_state) == ended
    assert ending.requeued == (ended[0] == "requeued")


def test_the_state_is_removed_only_on_positive_evidence() -> None:
    """Every row that removes the state has exit 0, no stop, no marker, no requeue wanted and a known Slurm."""
    for _, given, _, outcome, _ in ROWS:
        plan = interruption.decide(given)
        if interruption.decide(Settle(given, plan, outcome, "77")).remove_state:
            assert given.job_code == 0 and given.slurm is not None and given.marker is None
            assert given.run.stop is None and plan.requeue is None and given.run.requeued_by is None


def test_uncertainty_and_stops_are_said_in_one_line() -> None:
    unsure = interruption.decide(Settle(facts(slurm=None), EndAction(), None, "77"))
    assert unsure.line == (
        "Slurm could not be asked whether job 77 was requeued: its resume state is kept (remove it by hand once "
        "the job is known to be done)"
    )
    stopped = interruption.decide(Settle(facts(run=RunRecord(stop="clean-exit")), EndAction(), None, "77"))
    assert stopped.line == (
        "job 77 stopped before its work was done (clean-exit): its resume state is kept; slurmgen resume 77 "
        "brings it back from there"
    )
    failed = facts(slurm=PREEMPTED)
    line = interruption.decide(Settle(failed, interruption.decide(failed), "failed", "77")).line
    assert line is not None and line.startswith("job 77 was not requeued (Slurm did not take the requeue)")
