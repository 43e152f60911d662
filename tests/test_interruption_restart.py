"""The restart decision as a table (slurmgen.interruption.decide_restart, asked through
slurmgen.interruption.decide): a crash inside a running allocation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmgen import interruption
from slurmgen.interruption import allocation
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


REASONS = [
    # rank 0's store could not listen: slurmgen's own line, torch's, the kernel's
    ("RuntimeSetupError: port 29517 (SLURMGEN_PORT + SLURM_JOB_ID % SLURMGEN_PORT_RANGE) is already in use on n1; "
     "another job or process holds it", None, True, "rendezvous failed: port 29517 in use"),
    ("", "DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, "
     "useIpv6: 0, code: -98, name: EADDRINUSE", True, "rendezvous failed: port 29500 in use"),
    ("OSError: [Errno 98] Address already in use", None, True, "rendezvous failed: port in use"),
    # the exception the rank raised, recorded by its start-up hook
    ("ValueError: bad batch", "ValueError: bad batch", True, "ValueError: bad batch"),
    # a rank's last printed line is no reason (a SIGKILL comes between two lines); its signal is in `who`
    ("STEP 86", None, True, ""),
    # no task failed on its own: srun or a node ended the step
    ("", None, False, allocation.NO_TASK),
]  # fmt: skip


@pytest.mark.parametrize(("error", "raised", "any_task", "reason"), REASONS)
def test_a_failure_says_why_in_a_few_words(error: str, raised: str | None, any_task: bool, reason: str) -> None:
    assert allocation.failure_reason(error, raised, any_task) == reason


def test_the_restart_line_carries_the_reason() -> None:
    reason = "rendezvous failed: port 29517 in use"
    taken = Failure("rank 0 on n1 (exit 1)", "RuntimeSetupError: port 29517 ...", "", reason)
    plan = interruption.decide(facts(failure=taken))
    assert plan.restart and plan.line is not None
    assert plan.line.startswith("rank 0 on n1 (exit 1) failed (rendezvous failed: port 29517 in use): restarting")
    plan = interruption.decide(facts())
    assert plan.line is not None and plan.line.startswith("rank 1 on n2 (killed by SIGKILL) failed: restarting")
