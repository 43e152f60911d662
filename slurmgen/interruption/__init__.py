"""The interruption policy: what happens when a run of a job is interrupted or ends, decided in one place.

One entry point, `decide(facts)`: the facts of one event (states.Event: a signal before the step, the preemption
signal, a signal at a task, rank 0's stop, a requeue asked for, a failed step, a start of the step and its nodes,
a look of the preemption watcher, the end of the step) in, one action out (an Enum or a frozen dataclass:
requeue how and under which budget, restart, exclude a node, continue, end with a code). The processes that act
(the batch shell's helper, rank 0's Preemption, each task's supervisor, requeue.py) gather the facts once, ask,
and carry out the answer. Nothing here runs a command, reads a file or looks at the clock: every input is a
plain value, so every rule is a row of a table test (tests/test_interruption*.py).

Where the rules live:
- states.py: the events, phases, outcomes and actions (Enums);
- running.py: while a run is under way (signals before and during the step, rank 0's stop, the supervisor);
- allocation.py: inside a running allocation (restart after a crash or a hang, bad nodes, the watcher);
- ending.py: the end of the run (requeue or not, exit code, resume state);
- requeue_route.py: a requeue's budget and route, and what the site's Slurm does by itself;
- casualty.py: the rank that failed among its casualties;
- fallback.py: the preemption signal that no one took (auto's fallback, runtime's warning);
- hold.py: how long the rendered script holds an early preemption signal (no imports: the renderer reads it).

Callers import the facts, actions and helpers they use from the module that defines them, and ask `decide`.
Standard library and slurmgen's standard-library leaves (contract, exit_codes, run_history) only; the facts that
need Slurm's own parsing (a version) are passed in (tests/test_layers.py keeps the arrows pointing down).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:  # `X | Y` is evaluated only by the type checker: the batch shell's helper runs on Python 3.9
    from typing import TypeAlias

    from slurmgen.interruption.allocation import NodeFacts, NodePlan, RestartAction, RestartFacts, WatchFacts
    from slurmgen.interruption.ending import EndAction, EndFacts, Ending, Settle
    from slurmgen.interruption.requeue_route import RequeueFacts, RequeuePlan
    from slurmgen.interruption.running import (
        BeforeStepFacts,
        BeforeStepPlan,
        PreemptionSignalFacts,
        StopFacts,
        StopPlan,
        TaskRoute,
        TaskSignalFacts,
    )
    from slurmgen.interruption.states import SignalRoute, WatchStep

    Facts: TypeAlias = (
        BeforeStepFacts
        | PreemptionSignalFacts
        | TaskSignalFacts
        | StopFacts
        | RequeueFacts
        | RestartFacts
        | NodeFacts
        | WatchFacts
        | EndFacts
        | Settle
    )
    Answer: TypeAlias = (
        BeforeStepPlan
        | SignalRoute
        | TaskRoute
        | StopPlan
        | RequeuePlan
        | RestartAction
        | NodePlan
        | WatchStep
        | EndAction
        | Ending
    )

_RULES: dict[type[Any], Callable[[Any], Answer]] = {}


def rules() -> dict[type[Any], Callable[[Any], Answer]]:
    """Each facts type -> the rule that answers it, one rule per event. Imported on the first question, not with
    the package: the renderer imports hold.py, and so this package, and a plain render loads no rule
    (tests/cli/test_cli_commands.py)."""
    if not _RULES:
        from slurmgen.interruption.allocation import (
            NodeFacts,
            RestartFacts,
            WatchFacts,
            decide_nodes,
            decide_preempt_watch,
            decide_restart,
        )
        from slurmgen.interruption.ending import EndFacts, Settle, decide_end, settle
        from slurmgen.interruption.requeue_route import RequeueFacts, route_requeue
        from slurmgen.interruption.running import (
            BeforeStepFacts,
            PreemptionSignalFacts,
            StopFacts,
            TaskSignalFacts,
            decide_before_step,
            decide_stop,
            preemption_route,
            task_route,
        )

        _RULES.update(
            {
                BeforeStepFacts: decide_before_step,
                PreemptionSignalFacts: preemption_route,
                TaskSignalFacts: task_route,
                StopFacts: decide_stop,
                RequeueFacts: route_requeue,
                RestartFacts: decide_restart,
                NodeFacts: decide_nodes,
                WatchFacts: decide_preempt_watch,
                EndFacts: decide_end,
                Settle: settle,
            }
        )
    return _RULES


@overload
def decide(facts: BeforeStepFacts) -> BeforeStepPlan: ...
@overload
def decide(facts: PreemptionSignalFacts) -> SignalRoute: ...
@overload
def decide(facts: TaskSignalFacts) -> TaskRoute: ...
@overload
def decide(facts: StopFacts) -> StopPlan: ...
@overload
def decide(facts: RequeueFacts) -> RequeuePlan: ...
@overload
def decide(facts: RestartFacts) -> RestartAction: ...
@overload
def decide(facts: NodeFacts) -> NodePlan: ...
@overload
def decide(facts: WatchFacts) -> WatchStep: ...
@overload
def decide(facts: EndFacts) -> EndAction: ...
@overload
def decide(facts: Settle) -> Ending: ...
def decide(facts: Facts) -> Answer:
    """The policy's one entry point: the action for the facts of one event (each facts type names its event)."""
    return rules()[type(facts)](facts)


__all__ = ["decide", "rules"]
