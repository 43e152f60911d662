"""The decisions taken inside a running allocation, around the starts of the step: whether a failed step starts
again (`decide_restart`), which nodes a start runs on (`decide_nodes`), and what the preemption watcher does
after a look at the job (`decide_preempt_watch`).

A crash inside a running allocation is restarted in the same allocation, within recovery.max_restarts, unless
the failure repeats (the same error at the same saved state: a bug, not the machine) or a stop is under way; a
hang is decided the same way. Before every start of the step, a node that failed its checks, or that Slurm shows
down, is replaced by a spare, or the job is requeued away from it.

Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from slurmgen import contract
from slurmgen.interruption.casualty import error_key
from slurmgen.interruption.states import Event, RestartCause, WatchStep

# --- A crash inside a running allocation ---------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """One failed start of the step: the task that failed first and the state it could resume from."""

    who: str  # "rank 1 on node2 (exit 3)": task_failure.TaskFailure.describe(), or "the step (exit N)"
    error: str  # the failing rank's last line of its own (a traceback's last line), "" when none
    saved: str  # what a restart would resume from (the newest save it can see), "" when nothing was saved
    reason: str = ""  # why it failed, in a few words (`failure_reason`), "" when `who` says all that is known
    where: str = ""  # `file:line` of the program's own innermost frame in its traceback, "" when none was seen


# The rendezvous port taken: rank 0's store could not listen (runtime/c10d_store.py says "port N ... is already in
# use"; torch's TCPStore "The server socket has failed to listen on any local network address. port: N"; the
# kernel's EADDRINUSE "Address already in use").
PORT_TAKEN = re.compile(
    r"port (?P<a>\d+)\b[^;]*already in use|failed to listen on any local network address\.? port: (?P<b>\d+)|"
    r"Address already in use"
)
NO_TASK = "no task recorded a failure of its own: srun or a node ended the step (srun's lines above say which)"


def failure_reason(error: str, raised: str | None, any_task: bool) -> str:
    """Why a start of the step failed, in one line for the batch log and the history: a rendezvous whose port was
    taken, else the exception the failing rank raised (its start-up hook recorded it), else nothing more than its
    exit code or signal (a rank's last printed line need not be an error); ``any_task``: a task recorded a
    failure of its own at all."""
    if not any_task:
        return NO_TASK
    for text in (raised or "", error):
        if found := PORT_TAKEN.search(text):
            port = found["a"] or found["b"]
            return f"rendezvous failed: port {port} in use" if port else "rendezvous failed: port in use"
    return raised or ""


@dataclass(frozen=True)
class RestartFacts:
    EVENT: ClassVar[Event] = Event.STEP_FAILED
    step_code: int  # srun's exit code
    signals: tuple[str, ...]  # what reached the batch shell during this start of the step
    stopping: bool  # a stop or a requeue is recorded for this run, or a task left a requeue marker
    restarts: int  # restarts already made in this run
    max_restarts: int  # recovery.max_restarts
    failure: Failure
    previous: Failure | None  # the failure that caused the last restart of this run, if any
    event: RestartCause = RestartCause.CRASH  # or HANG: the hang watchdog ended the step (task/watchdog.py)
    no_gpu: bool = False  # the step runs where it has no GPU (a local run on CPU): CUDA errors cannot heal


@dataclass(frozen=True)
class RestartAction:
    restart: bool
    cause: RestartCause | None = None  # CRASH or HANG, or REPEATED when it is not restarted because it repeats
    line: str | None = None


# A program written for CUDA only, run where there is no GPU: what torch says, on a CPU build and on a CUDA build
# without a device (init_process_group("nccl"), torch.cuda.set_device, .to("cuda:N"), DDP(device_ids=...)).
# The recipe of the manual for such a program (docs/local-runs.md, "Programs written for CUDA only").
CUDA_RECIPE = "docs/local-runs.md#programs-written-for-cuda-only"
NO_GPU_ERRORS = re.compile(
    r"doesn't have NCCL built in|Torch not compiled with CUDA enabled|has no attribute '_cuda_|"
    r"Found no NVIDIA driver|No CUDA GPUs are available|no GPUs found|invalid device ordinal|"
    r"CUDA driver initialization failed"
)


def decide_restart(facts: RestartFacts) -> RestartAction:
    """Whether the batch shell starts the step again inside this allocation after it ended."""
    if facts.step_code == 0 or facts.signals or facts.stopping:
        return RestartAction(False)  # done, or a stop is under way: decide_end owns it
    failure, before = facts.failure, facts.previous
    if facts.no_gpu and NO_GPU_ERRORS.search(failure.error):
        # It would fail the same way at once: a restart only doubles the failure and the wait before it.
        at = f" at {failure.where}" if failure.where else ""
        line = (f"{failure.who} failed for want of a GPU{at} ({failure.error!r}), and this run has none: not "
                "restarted, it would fail the same way; the job ends with the program's exit code. To rehearse it "
                "on CPU, take the backend from SLURMGEN_BACKEND and pass DDP device_ids=None without a GPU "
                f"({CUDA_RECIPE})")  # fmt: skip
        return RestartAction(False, None, line)
    # The same error, whatever port, pid or address it names this time (ending.error_key).
    same = before is not None and error_key(failure.error) == error_key(before.error)
    if before is not None and failure.error and same and failure.saved == before.saved:
        line = (f"{failure.who} failed again with the same error at the same saved state ({failure.error!r}): a "
                "failure that repeats is not restarted; the job ends with the program's exit code")  # fmt: skip
        return RestartAction(False, RestartCause.REPEATED, line)
    if facts.restarts >= facts.max_restarts:
        if facts.max_restarts == 0:
            return RestartAction(False)
        line = f"{failure.who} failed; the restarts inside the allocation are spent ({facts.restarts} of " \
               f"{facts.max_restarts}, recovery.max_restarts)"  # fmt: skip
        return RestartAction(False, None, line)
    how = "hung" if facts.event == RestartCause.HANG else "failed"
    how += f" ({failure.reason})" if failure.reason else ""
    line = (f"{failure.who} {how}: restarting the step inside the allocation (restart {facts.restarts + 1} of "
            f"{facts.max_restarts}), from the last complete checkpoint")  # fmt: skip
    return RestartAction(True, facts.event, line)


# --- A preemption notice that never reached the batch shell -------------------------------------------------


@dataclass(frozen=True)
class WatchFacts:
    """One look of the batch shell's watcher at the job."""

    EVENT: ClassVar[Event] = Event.WATCH
    preempted: bool | None  # PreemptTime is set; None: Slurm could not be asked this time
    running: bool  # Slurm shows the job running
    received: frozenset[str]  # the signals the batch shell received so far
    preempt_signal: str  # the spec's preemption signal


def decide_preempt_watch(facts: WatchFacts) -> WatchStep:
    """What the batch shell's watcher does after one look at the job.

    Slurm sends the `--signal` user signal at preemption only with send_user_signal, and even then it may not
    arrive (measured on 24.11: 13 of 21 preemptions): the job is then told nothing before the TERM at the end of
    its grace time. PreemptTime on the job says the preemption began (src/interfaces/preempt.c sets preempt_time
    as the grace starts). A TERM or a stop signal that came already is the notice (or a stop of its own), so the
    watcher is done; so is a job that no longer runs (Slurm is ending or requeueing it)."""
    if facts.received & {facts.preempt_signal, contract.SAVE_EXIT_SIGNAL, contract.CLEAN_EXIT_SIGNAL}:
        return WatchStep.DONE
    if facts.preempted is None:
        return WatchStep.WAIT
    if not facts.running:
        return WatchStep.DONE
    return WatchStep.SIGNAL if facts.preempted else WatchStep.WAIT


def preempt_watch_needed(site: Mapping[str, Any]) -> bool:
    """Whether the watcher has anything to wait for in this run, from the site recorded at its start (the run
    history's run-start `site`; empty: Slurm could not be asked). It helps only where a preemption leaves the job
    a grace time to use: PreemptMode REQUEUE or CANCEL with GraceTime > 0 (without grace Slurm ends or requeues
    the job at once, and the TERM is the notice). With preempt/qos the mode and grace are the QOS's, which the
    record cannot know: watch. Unknown is watched too: a look is cheap, a lost grace is not."""
    if not site:
        return True
    if site.get("preempt_type") == "preempt/qos":
        return True
    try:
        grace = int(site.get("grace") or 0)
    except (TypeError, ValueError):
        return True
    return site.get("mode") in ("REQUEUE", "CANCEL") and grace > 0


# --- Bad nodes: before every start of the step -----------------------------------------------------------------


@dataclass(frozen=True)
class NodeFacts:
    """What is known of the allocation's nodes before a start of the step (batch/nodes.py gathers it)."""

    EVENT: ClassVar[Event] = Event.NODES
    hosts: tuple[str, ...]  # the allocation's nodes, in Slurm's order (SLURM_JOB_NODELIST)
    needed: int  # the spec's `nodes`: the step runs on exactly this many
    excluded: Mapping[str, str]  # nodes excluded earlier in this run, and why
    failed: Mapping[str, str]  # nodes that failed a check now, or that Slurm shows down: evidence, with its reason


@dataclass(frozen=True)
class NodePlan:
    run_on: tuple[str, ...]  # the nodes the step starts on; () when it does not start in this allocation
    exclude: tuple[tuple[str, str], ...]  # newly excluded nodes and why, to record
    requeue_excluding: tuple[str, ...] = ()  # no spare left: requeue the job with these nodes in its ExcNodeList
    line: str | None = None


def decide_nodes(facts: NodeFacts) -> NodePlan:
    """Which nodes the step starts on. A node is blamed only on evidence (a failed check, Slurm's own state), never
    for the program's exception. With enough healthy nodes left (the spares), the step runs on the first
    ``needed`` of them inside this allocation; without, the job is requeued away from every bad node."""
    new = tuple((n, facts.failed[n]) for n in facts.hosts if n in facts.failed and n not in facts.excluded)
    bad = set(facts.excluded) | {n for n, _ in new}
    healthy = tuple(n for n in facts.hosts if n not in bad)
    said = "; ".join(f"{n}: {why}" for n, why in new)
    if len(healthy) >= facts.needed:
        line = None
        if new:
            spare = len(healthy) - facts.needed
            line = (f"excluding {said}; the step runs on {', '.join(healthy[: facts.needed])} "
                    f"({spare} spare node{'s' if spare != 1 else ''} left)")  # fmt: skip
        return NodePlan(healthy[: facts.needed], new, (), line)
    away = tuple(n for n in facts.hosts if n in bad)
    line = (f"{'excluding ' + said + '; ' if new else ''}{len(healthy)} healthy node{'s' if len(healthy) != 1 else ''}"
            f" of {facts.needed} needed, no spare left: requeueing the job away from {', '.join(away)}")  # fmt: skip
    return NodePlan((), new, away, line)
