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
- ending.py: the end of the run (requeue or not, exit code, resume state), with the two rules it shares: a
  requeue's budget and route (and what the site's Slurm does by itself), and the rank that failed among its
  casualties;
- hold.py: how long the rendered script holds an early preemption signal (no imports: the renderer reads it).

Standard library and slurmgen's standard-library leaves (contract, exit_codes, run_history) only; the facts that
need Slurm's own parsing (a version) are passed in (tests/test_layers.py keeps the arrows pointing down).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:  # what mypy and editors see; at run time __getattr__ loads each name when first asked for
    from typing import TypeAlias

    from slurmgen.interruption.allocation import (
        NO_GPU_ERRORS,
        Failure,
        NodeFacts,
        NodePlan,
        RestartAction,
        RestartFacts,
        WatchFacts,
        preempt_watch_needed,
    )
    from slurmgen.interruption.ending import (
        EndAction,
        EndFacts,
        Ending,
        RequeueFacts,
        RequeuePlan,
        RunRecord,
        Settle,
        SiteFacts,
        SlurmSays,
        budget_refusal,
        fallback_note,
        fallback_warning,
        never_taken,
        run_record,
        signal_cause,
        slurm_ends_graced_preempted,
        slurm_requeue_cause,
        slurm_requeues_in_grace,
        unanswered,
    )
    from slurmgen.interruption.hold import STEP_GRACE, hold_limit
    from slurmgen.interruption.running import (
        ANNOUNCE_WAIT,
        BeforeStepFacts,
        BeforeStepPlan,
        PreemptionSignalFacts,
        SignalMeaning,
        StopFacts,
        StopPlan,
        TaskRoute,
        TaskSignalFacts,
        announce_wait_for,
        signal_meanings,
        window_end,
    )
    from slurmgen.interruption.states import (
        BeforeStep,
        Ended,
        Event,
        Phase,
        RequeueHow,
        RequeueResult,
        RequeueRoute,
        RestartCause,
        SignalRoute,
        WatchStep,
    )

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
    ) | Ending

# The name -> its module, loaded on first use (PEP 562): importing a submodule imports this package first, so this
# package imports none of them at its own import (no circle; tests/test_layers.py).
_LAZY = {
    "ANNOUNCE_WAIT": "running",
    "announce_wait_for": "running",
    "fallback_note": "ending",
    "NO_GPU_ERRORS": "allocation",
    "Failure": "allocation",
    "NodeFacts": "allocation",
    "NodePlan": "allocation",
    "RestartAction": "allocation",
    "RestartFacts": "allocation",
    "WatchFacts": "allocation",
    "preempt_watch_needed": "allocation",
    "EndAction": "ending",
    "EndFacts": "ending",
    "Ending": "ending",
    "RunRecord": "ending",
    "Settle": "ending",
    "SlurmSays": "ending",
    "run_record": "ending",
    "fallback_warning": "ending",
    "never_taken": "ending",
    "unanswered": "ending",
    "RequeueFacts": "ending",
    "RequeuePlan": "ending",
    "SiteFacts": "ending",
    "budget_refusal": "ending",
    "slurm_ends_graced_preempted": "ending",
    "slurm_requeue_cause": "ending",
    "slurm_requeues_in_grace": "ending",
    "STEP_GRACE": "hold",
    "BeforeStepFacts": "running",
    "BeforeStepPlan": "running",
    "PreemptionSignalFacts": "running",
    "StopFacts": "running",
    "StopPlan": "running",
    "TaskRoute": "running",
    "TaskSignalFacts": "running",
    "hold_limit": "hold",
    "SignalMeaning": "running",
    "signal_meanings": "running",
    "signal_cause": "ending",
    "window_end": "running",
    "BeforeStep": "states",
    "Ended": "states",
    "Event": "states",
    "Phase": "states",
    "RequeueHow": "states",
    "RequeueResult": "states",
    "RequeueRoute": "states",
    "RestartCause": "states",
    "SignalRoute": "states",
    "WatchStep": "states",
}

# Event -> the rule that answers it: (module, function). One rule per event.
_DECISIONS = {
    "signal-before-step": ("running", "decide_before_step"),
    "preemption-signal": ("running", "preemption_route"),
    "task-signal": ("running", "task_route"),
    "stop": ("running", "decide_stop"),
    "requeue": ("ending", "route_requeue"),
    "step-failed": ("allocation", "decide_restart"),
    "nodes": ("allocation", "decide_nodes"),
    "watch": ("allocation", "decide_preempt_watch"),
    "step-ended": ("ending", "decide_end"),
    "run-ended": ("ending", "settle"),
}


def __getattr__(name: str) -> object:  # PEP 562
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
    import importlib

    module, rule = _DECISIONS[facts.EVENT.value]
    answer: Answer = getattr(importlib.import_module(f"{__name__}.{module}"), rule)(facts)
    return answer


__all__ = [
    "ANNOUNCE_WAIT",
    "NO_GPU_ERRORS",
    "STEP_GRACE",
    "BeforeStep",
    "BeforeStepFacts",
    "BeforeStepPlan",
    "EndAction",
    "EndFacts",
    "Ended",
    "Ending",
    "Event",
    "Failure",
    "NodeFacts",
    "NodePlan",
    "Phase",
    "PreemptionSignalFacts",
    "RequeueFacts",
    "RequeueHow",
    "RequeuePlan",
    "RequeueResult",
    "RequeueRoute",
    "RestartAction",
    "RestartCause",
    "RestartFacts",
    "RunRecord",
    "Settle",
    "SignalMeaning",
    "SignalRoute",
    "SiteFacts",
    "SlurmSays",
    "StopFacts",
    "StopPlan",
    "TaskRoute",
    "TaskSignalFacts",
    "WatchFacts",
    "WatchStep",
    "announce_wait_for",
    "budget_refusal",
    "decide",
    "fallback_note",
    "fallback_warning",
    "hold_limit",
    "never_taken",
    "preempt_watch_needed",
    "run_record",
    "signal_cause",
    "signal_meanings",
    "slurm_ends_graced_preempted",
    "slurm_requeue_cause",
    "slurm_requeues_in_grace",
    "unanswered",
    "window_end",
]
