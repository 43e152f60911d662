"""The scenario engine's axes: the corpus takes every value of every axis, hypothesis draws only valid scenarios,
an invalid combination is filtered with its reason, and every scenario has a one-line reproduction."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings

from scenarios import axes
from scenarios.axes import Interruption, Scenario, why_invalid
from scenarios.local_place import plan
from scenarios.test_corpus import CORPUS


def test_the_corpus_takes_every_axis_value_at_least_once() -> None:
    taken = {
        "shape": {s.shape for s in CORPUS},
        "launcher": {s.launcher for s in CORPUS},
        "size": {(s.nodes, s.tasks) for s in CORPUS},
        "handler": {s.handler for s in CORPUS},
        "recovery": {s.recovery for s in CORPUS},
        "interruption": {k for s in CORPUS for k in s.kinds()},
    }
    assert taken == {
        "shape": set(axes.SHAPES),
        "launcher": set(axes.LAUNCHERS),
        "size": set(axes.SIZES),
        "handler": set(axes.HANDLERS),
        "recovery": {True, False},
        # no requeue by hand on the local emulator (why_invalid); the time limit costs minutes: the soak draws it
        "interruption": set(axes.KINDS) - {"requeue", "time_limit"},
    }
    assert all(why_invalid(s) is None for s in CORPUS)
    assert any(s.kinds() == ("preempt_restart",) for s in CORPUS)  # two interruptions in one run: kill, preempt


@settings(max_examples=60, deadline=None)
@given(axes.scenarios())
def test_drawn_scenarios_are_valid_and_reproducible_in_one_line(s: Scenario) -> None:
    assert why_invalid(s) is None
    p = plan(s, Path("/tmp/scenario"))
    line = p.reproduction()
    assert "\n" not in line and "slurmgen run job.yaml" in line and re.search(r"program(_lightning)?\.py", line)


def test_invalid_combinations_are_filtered_with_their_reason() -> None:
    one_node = Scenario("pg", "srun", 1, 2, "auto", True, (Interruption("bad_node"),))
    assert why_invalid(one_node) == "a bad node needs a second node and recovery's health check"
    alone = Scenario("pg", "srun", 1, 1, "auto", True, (Interruption("crash_late", 0, 20),))
    assert why_invalid(alone) == "a rank can only outlive peers it has, joined by a process group"
    two = Scenario("pg", "srun", 1, 2, "auto", True, (Interruption("crash", 0, 4), Interruption("hang", 1, 4)))
    assert why_invalid(two) == "--kill-rank and --hang-rank take one --at-step: one rehearsal of a rank per run"
    program = Scenario("own", "srun", 1, 1, "program", True, (Interruption("preempt_first"),))
    assert why_invalid(program) == "handler program: the program handles the signal itself, and this one has no handler"


def test_the_plan_carries_each_interruption_to_its_option() -> None:
    s = Scenario("pg", "srun", 2, 2, "auto", True, (Interruption("preempt_restart", 3, 12),))
    p = plan(s, Path("/tmp/scenario"))
    assert p.args == ["--kill-rank", "3", "--at-step", "12", "--preempt-at-step", "14"]
    assert "nodes: 2\ntasks_per_node: 2\nlauncher: srun\n" in p.spec and "handler: auto" in p.spec
    late = plan(Scenario("pg", "srun", 1, 2, "auto", False, (Interruption("crash_late", 1, 20),)), Path("/tmp/s"))
    assert late.args == [] and "recovery: false\n" in late.spec
    assert '"--fail-rank", "1", "--fail-at", "20", "--linger", "3"' in late.spec
