"""The restart decision as a table (slurmgen.interruption.decide_restart, asked through
slurmgen.interruption.decide): a crash inside a running allocation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmgen import interruption
from slurmgen.interruption.allocation import Failure, RestartFacts
from slurmgen.interruption.states import RestartCause

OTHER = Failure("rank 0 on n1 (exit 1)", "OSError: x", "save-2")
CRASH = Failure("rank 1 on n2 (killed by SIGKILL)", "", "save-3")
BUG = Failure("rank 0 on n1 (exit 1)", "ValueError: bad batch at step 50", "save-2")


def facts(**changes: object) -> RestartFacts:
    base = RestartFacts(
        step_code=137, signals=(), stopping=False, restarts=0, max_restarts=3, failure=CRASH, previous=None
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "restart", "cause"),
    [
        ({}, True, RestartCause.CRASH),  # a crash: start again inside the allocation
        ({"step_code": 0}, False, None),  # done
        ({"signals": ("USR1",)}, False, None),  # a preemption or a request is under way: the end decides
        ({"stopping": True}, False, None),  # rank 0 agreed a stop, or a task asked for a requeue
        ({"restarts": 3}, False, None),  # budget spent: the end decides (requeue_on_failure)
        ({"max_restarts": 0}, False, None),  # recovery off
        ({"restarts": 1, "previous": CRASH}, True, RestartCause.CRASH),  # no error line: not a proven bug
        (
            {"failure": BUG, "previous": BUG, "restarts": 1},
            False,
            RestartCause.REPEATED,
        ),  # the same bug again
        (
            {"failure": BUG, "previous": replace(BUG, saved="save-1"), "restarts": 1},
            True,
            RestartCause.CRASH,
        ),
        ({"failure": BUG, "previous": OTHER, "restarts": 1}, True, RestartCause.CRASH),
    ],
)
def test_restart_table(changes: dict[str, object], restart: bool, cause: str | None) -> None:
    plan = interruption.decide(facts(**changes))
    assert (plan.restart, plan.cause) == (restart, cause)


def test_each_decision_that_acts_says_one_line() -> None:
    again = interruption.decide(facts())
    assert again.line == (
        "rank 1 on n2 (killed by SIGKILL) failed: restarting the step inside the allocation (restart 1 of 3), from "
        "the last complete checkpoint"
    )
    repeat = interruption.decide(facts(failure=BUG, previous=BUG, restarts=1))
    assert repeat.line is not None and "'ValueError: bad batch at step 50'" in repeat.line
    assert "is not restarted; the job ends with the program's exit code" in repeat.line
    spent = interruption.decide(facts(restarts=3))
    assert spent.line is not None and "(3 of 3, recovery.max_restarts)" in spent.line


def test_a_repeated_failure_is_not_requeued_on_failure_either() -> None:
    from test_interruption import facts as end_facts

    failing = end_facts(step_code=1, job_code=1, requeue_on_failure=True)
    assert interruption.decide(failing).requeue is not None
    assert interruption.decide(replace(failing, repeated=True)).requeue is None
