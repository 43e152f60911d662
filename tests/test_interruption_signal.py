"""The decisions taken while the step runs (interruption/running.py, and requeue_route.py), as tables: no
processes, no Slurm. Each question goes through the policy's one entry point, slurmgen.interruption.decide."""

from __future__ import annotations

import pytest

from slurmgen import contract, exit_codes, run_history
from slurmgen.interruption import decide
from slurmgen.interruption.requeue_route import (
    SiteFacts,
    budget_refusal,
    signal_cause,
    slurm_requeue_cause,
    slurm_requeues_in_grace,
)
from slurmgen.interruption.running import (
    BeforeStepFacts,
    PreemptionSignalFacts,
    StopFacts,
    StopPlan,
    TaskSignalFacts,
    signal_meanings,
    window_end,
)
from slurmgen.interruption.states import BeforeStep, Phase
from slurmgen.slurm.ids import version_tuple

P, T, R = run_history.PREEMPTION, run_history.TIME_LIMIT, run_history.REQUESTED
START, LIMIT, LEAD = 1000.0, 3600.0, 120.0  # the limit's warning comes at 4480; with Slurm's slack from 4390


@pytest.mark.parametrize(
    ("preempted", "now", "cause"),
    [
        (True, 2000.0, P),  # Slurm shows PreemptTime: a preemption, whatever the clock
        (True, 4500.0, P),
        (False, 4390.0, T),  # within the lead time and the slack of the limit: its warning
        (None, 4480.0, T),
        (False, 4389.0, R),  # before: someone asked (scancel --signal), Slurm says not preempted
        (None, 2000.0, P),  # Slurm could not be asked: taken for a preemption
    ],
)
def test_signal_cause(preempted: bool | None, now: float, cause: str) -> None:
    assert signal_cause(preempted, now, START, LIMIT, LEAD) == cause


def test_signal_cause_without_a_known_limit_is_never_the_limit() -> None:
    assert signal_cause(False, 10**9, None, LIMIT, LEAD) == R
    assert signal_cause(None, 10**9, START, None, LEAD) == P


@pytest.mark.parametrize(
    ("handler", "announced", "route"),
    [
        (contract.HANDLER_RUNTIME, False, "forward"),
        (contract.HANDLER_PROGRAM, False, "forward"),
        (contract.HANDLER_AUTO, True, "forward"),
        (contract.HANDLER_AUTO, False, "wait"),
        (contract.HANDLER_REQUEUE, True, "stop"),
        (contract.HANDLER_REQUEUE, False, "stop"),
    ],
)
def test_preemption_route(handler: str, announced: bool, route: str) -> None:
    assert decide(PreemptionSignalFacts(handler, announced)) == route


@pytest.mark.parametrize(
    ("cause", "preempt_end", "end"),
    [
        (P, 1500.0, 1500.0),  # a preemption: its grace end, as Slurm shows it
        (P, None, None),  # Slurm did not say (or the job no longer runs)
        (T, 1500.0, START + LIMIT),  # the time limit
        (R, 1500.0, None),  # a request: no one ends the run
    ],
)
def test_window_end(cause: str, preempt_end: float | None, end: float | None) -> None:
    assert window_end(cause, preempt_end, START, LIMIT) == end


@pytest.mark.parametrize(
    ("cause", "counts", "max_requeues", "max_preemptions", "refused"),
    [
        (T, run_history.Counts(2, 9, 9), 3, None, None),
        (T, run_history.Counts(3, 0, 0), 3, None, "its requeue budget is used up (3 of 3, preemption.max_requeues)"),
        (R, run_history.Counts(1, 0, 0), 1, None, "its requeue budget is used up (1 of 1, preemption.max_requeues)"),
        (P, run_history.Counts(9, 0, 0), 3, None, None),  # a preemption is not the job's fault: no limit by default
        (P, run_history.Counts(0, 2, 0), 0, 2, "its preemption budget is used up (2 of 2, preemption.max_preemptions)"),
        (run_history.FAILURE, run_history.Counts(0, 0, 5), None, None, None),  # others' requeues count nowhere
    ],
)
def test_budget_refusal(
    cause: str, counts: run_history.Counts, max_requeues: int | None, max_preemptions: int | None, refused: str | None
) -> None:
    assert budget_refusal(cause, counts, max_requeues, max_preemptions) == refused


@pytest.mark.parametrize(
    ("site", "requeues"),
    [
        ({"mode": "REQUEUE", "version": "24.11.1"}, True),
        ({"mode": "REQUEUE", "version": "24.05.0"}, True),
        ({"mode": "REQUEUE", "version": "23.11.10"}, False),
        ({"mode": "CANCEL", "version": "24.11.1"}, False),
        ({"mode": "REQUEUE"}, False),  # the version is unknown: slurmgen requeues, as before 24.05
        ({}, False),
    ],
)
def test_slurm_requeues_in_grace(site: dict[str, str], requeues: bool) -> None:
    assert slurm_requeues_in_grace(SiteFacts.of(site, version_tuple(site.get("version")))) is requeues


def test_slurm_requeue_cause() -> None:
    assert slurm_requeue_cause(True, None) == P
    assert slurm_requeue_cause(False, "REQUEUE") == P  # PreemptTime is gone while Slurm requeues a preempted job
    assert slurm_requeue_cause(False, "CANCEL") == run_history.EXTERNAL
    assert slurm_requeue_cause(False, None) == run_history.EXTERNAL


def stop(**changes: bool) -> StopFacts:
    base = {"asked_requeue": True, "terminated": False, "requeue_enabled": True, "preempted": False, "running": True,
            "slurm_requeues": False}  # fmt: skip
    return StopFacts(**(base | changes))


@pytest.mark.parametrize(
    ("facts", "plan"),
    [
        (stop(), StopPlan(True, 0, False)),  # a requeue signal: save, requeue, exit 0
        (stop(requeue_enabled=False), StopPlan(False, 0, False)),  # preemption off in the spec: never requeue
        (stop(asked_requeue=False), StopPlan(False, 0, False)),  # USR2: a clean exit
        (stop(asked_requeue=False, terminated=True), StopPlan(False, exit_codes.EXIT_TERMINATED, False)),
        # SIGTERM in a grace time: preempted and still running, rank 0 requeues once the state is durable
        (stop(asked_requeue=False, terminated=True, preempted=True), StopPlan(True, 0, False)),
        # ... unless the site's Slurm requeues a job ending in its grace itself (24.05 and later)
        (stop(terminated=True, preempted=True, slurm_requeues=True), StopPlan(False, 0, True)),
        # preempted and no longer running (Slurm requeued it already): nothing more, exit 0
        (stop(asked_requeue=False, terminated=True, preempted=True, running=False), StopPlan(False, 0, False)),
        (stop(preempted=True, requeue_enabled=False), StopPlan(False, 0, False)),
    ],
)
def test_decide_stop(facts: StopFacts, plan: StopPlan) -> None:
    assert decide(facts) == plan


def route(handler: str, **facts: bool) -> tuple[bool, bool]:
    base = {"preemption_signal": True, "program_catches": True, "hooked": False, "stepwide": False, "recent": False}
    found = decide(TaskSignalFacts(handler=handler, **(base | facts)))
    return found.forward, found.owed


@pytest.mark.parametrize(
    ("handler", "facts", "forward_owed"),
    [
        (contract.HANDLER_RUNTIME, {}, (True, False)),  # sent by the batch shell to srun's process only: forward
        (contract.HANDLER_RUNTIME, {"stepwide": True}, (False, False)),  # slurmstepd gave it to the program too
        (contract.HANDLER_RUNTIME, {"recent": True}, (False, False)),  # a repeat of one that was step-wide
        (contract.HANDLER_REQUEUE, {}, (False, False)),  # the batch shell stops the step itself
        (contract.HANDLER_PROGRAM, {}, (True, False)),  # the program has its handler: forward
        (contract.HANDLER_PROGRAM, {"program_catches": False}, (False, True)),  # no handler yet: owed, later
        (contract.HANDLER_PROGRAM, {"program_catches": False, "hooked": True}, (True, True)),  # blocked there
        (contract.HANDLER_PROGRAM, {"preemption_signal": False, "program_catches": False}, (True, False)),
        (contract.HANDLER_REQUEUE, {"preemption_signal": False}, (True, False)),  # TERM and others: forwarded
    ],
)
def test_task_route(handler: str, facts: dict[str, bool], forward_owed: tuple[bool, bool]) -> None:
    assert route(handler, **facts) == forward_owed


@pytest.mark.parametrize(
    ("lead_time", "hold"),
    [(0, 3), (8, 3), (12, 3), (16, 4), (300, 75), (301, 75)],
)
def test_the_hold_window_is_a_quarter_of_the_lead_time_and_never_under_the_step_grace(
    lead_time: int, hold: int
) -> None:
    """An early preemption signal is held until every task has blocked it, but never past a quarter of the lead
    time (the program needs the rest to save) and at least the step grace (a task's file may not be seen)."""
    from slurmgen.interruption.hold import STEP_GRACE, hold_limit

    assert STEP_GRACE == 3
    assert hold_limit(lead_time) == hold


@pytest.mark.parametrize(
    ("signals", "phase", "plan"),
    [
        ((), Phase.STARTING, (BeforeStep.START, 0)),
        (("USR1",), Phase.STARTING, (BeforeStep.START, 0)),  # the preemption signal: given to the step once it runs
        (("TERM",), Phase.STARTING, (BeforeStep.EXIT, exit_codes.EXIT_TERMINATED)),  # nothing ran: leave with 143
        (("USR2",), Phase.STARTING, (BeforeStep.EXIT, 0)),  # a clean exit asked for before any work
        (("USR2", "TERM"), Phase.STARTING, (BeforeStep.EXIT, exit_codes.EXIT_TERMINATED)),  # TERM wins
        (("USR1",), Phase.RESTARTING, (BeforeStep.START, 0)),
        (("TERM",), Phase.RESTARTING, (BeforeStep.END, 0)),  # a run to end: its record, requeue and state
        (("USR2",), Phase.RESTARTING, (BeforeStep.END, 0)),
    ],
)
def test_decide_before_step(signals: tuple[str, ...], phase: Phase, plan: tuple[BeforeStep, int]) -> None:
    found = decide(BeforeStepFacts(signals, phase))
    assert (found.action, found.code) == plan
    assert (found.line is None) == (found.action is BeforeStep.START)


@pytest.mark.parametrize(
    ("requeue_enabled", "expected"),
    [
        (True, {"USR1": (True, True, False), "TERM": (False, True, True), "USR2": (False, False, False)}),
        (False, {"USR1": (False, True, False), "TERM": (False, True, True), "USR2": (False, False, False)}),
    ],
)
def test_what_each_signal_means_to_rank_0(requeue_enabled: bool, expected: dict[str, tuple[bool, bool, bool]]) -> None:
    """(requeue, save, terminated) for each signal Preemption takes; every one ends in an exit."""
    found = signal_meanings("USR1", requeue_enabled)
    assert {name: (m.requeue, m.save, m.terminated) for name, m in found.items()} == expected
