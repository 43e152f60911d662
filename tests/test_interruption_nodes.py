"""The bad-node decision as a table (slurmgen.interruption.decide_nodes, asked through
slurmgen.interruption.decide): before every start of the step."""

from __future__ import annotations

import pytest

from slurmgen import interruption
from slurmgen.interruption.allocation import NodeFacts

HOSTS = ("n1", "n2", "n3")
SICK = "health check failed (exit 1)"


@pytest.mark.parametrize(
    ("needed", "excluded", "failed", "run_on", "newly", "away"),
    [
        (2, {}, {}, ("n1", "n2"), (), ()),  # all healthy: the first `nodes`, the spare stays idle
        (2, {}, {"n1": SICK}, ("n2", "n3"), ("n1",), ()),  # a spare takes the bad node's place
        (2, {"n1": SICK}, {}, ("n2", "n3"), (), ()),  # excluded earlier in the run: stays out, not recorded again
        (2, {"n1": SICK}, {"n1": SICK}, ("n2", "n3"), (), ()),  # still failing: no second record
        (2, {"n1": SICK}, {"n3": "Slurm shows it DOWN"}, (), ("n3",), ("n1", "n3")),  # spares spent: requeue
        (3, {}, {"n2": SICK}, (), ("n2",), ("n2",)),  # no spare at all: requeue away from the bad node
        (3, {}, {}, ("n1", "n2", "n3"), (), ()),
        (2, {}, {"elsewhere": SICK}, ("n1", "n2"), (), ()),  # only the allocation's nodes can be blamed
    ],
)
def test_node_table(
    needed: int,
    excluded: dict[str, str],
    failed: dict[str, str],
    run_on: tuple[str, ...],
    newly: tuple[str, ...],
    away: tuple[str, ...],
) -> None:
    plan = interruption.decide(NodeFacts(HOSTS, needed, excluded, failed))
    assert plan.run_on == run_on
    assert tuple(n for n, _ in plan.exclude) == newly
    assert plan.requeue_excluding == away


def test_each_exclusion_says_why_and_where_the_step_runs() -> None:
    spare = interruption.decide(NodeFacts(HOSTS, 2, {}, {"n2": SICK}))
    assert spare.line == f"excluding n2: {SICK}; the step runs on n1, n3 (0 spare nodes left)"
    assert spare.exclude == (("n2", SICK),)
    requeue = interruption.decide(NodeFacts(HOSTS[:2], 2, {}, {"n1": SICK}))
    assert requeue.line == f"excluding n1: {SICK}; 1 healthy node of 2 needed, no spare left: requeueing the job " \
                           "away from n1"  # fmt: skip
    assert interruption.decide(NodeFacts(HOSTS, 2, {}, {})).line is None
