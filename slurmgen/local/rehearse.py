"""Failure rehearsals for `slurmgen run` (docs/reliability.md, "When things fail"): `--kill-rank R --after S` kills
rank R's program with SIGKILL at S seconds of the first run, as an out-of-memory kill or a segfault would;
`--hang-rank R --after S` stops it with SIGSTOP, so it makes no progress while alive, as a deadlock would (the hang
watchdog then writes its stacks and restarts the step). A user sees what their recovery settings do before spending GPU
hours.

Which process is rank R's program: below the batch shell, the topmost process whose environment (as it was
started: /proc/<pid>/environ) has RANK=R and that is not slurmgen's supervisor (`python -m slurmgen.task`). Under
srun the supervisor computes RANK for its child and starts without it; under torchrun the agent starts each
worker's supervisor with RANK set, so the supervisor is passed over by its command line: the process killed is
the program the user wrote, as an out-of-memory kill would pick, and its supervisor records the failure with its
rank (killing the supervisor instead took the program down unrecorded, and the restart named no rank).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import Callable

from slurmgen.local import procs


def start_env(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with, or {} when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {name: value for name, _, value in pairs}


def is_supervisor(pid: int) -> bool:
    """Whether ``pid`` runs slurmgen's task entry point (`python -m slurmgen.task ...`)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            words = handle.read().split(b"\0")
    except OSError:
        return False
    return any(a == b"-m" and b == b"slurmgen.task" for a, b in itertools.pairwise(words))


def programs_of_rank(root: int, rank: int) -> list[int]:
    """The topmost processes below ``root`` started with RANK=rank, slurmgen's supervisors passed over."""
    parent = {pid: ppid for pid, _, ppid, _ in procs.processes()}
    found = []
    for pid in procs.descendants([root]):
        if start_env(pid).get("RANK") != str(rank) or is_supervisor(pid):
            continue
        above = parent.get(pid, 0)
        if start_env(above).get("RANK") == str(rank) and not is_supervisor(above):
            continue  # a child of the program, which goes with it
        found.append(pid)
    return found


KILL = "kill"
HANG = "hang"
SIGNALS = {KILL: signal.SIGKILL, HANG: signal.SIGSTOP}


def act_on_rank(root: int, rank: int, what: str, say: Callable[[str], None]) -> bool:
    """SIGKILL (``kill``) or SIGSTOP (``hang``) rank ``rank``'s program; False (said) when none runs now."""
    sig = SIGNALS[what]
    found = programs_of_rank(root, rank)
    if not found:
        say(f"{what} rehearsal: no program of rank {rank} is running now; nothing done")
        return False
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    say(f"{what} rehearsal: {sig.name} to rank {rank}'s program (pid {', '.join(map(str, found))})")
    return True


# --- did the rehearsal happen? ---------------------------------------------------------------------------------------

# What the runner saw of a rehearsal's moment: NOT_REACHED (the job ended first), DONE, NOBODY (no program of
# the rank ran then: act_on_rank's False), or GAVE_UP (a step rehearsal's step not reached within --step-wait).
NOT_REACHED, DONE, NOBODY, GAVE_UP = "not reached", "done", "nobody", "gave up"


def missed_lines(
    asked: tuple[str, str], outcome: str, state: str, seconds: float, rank: int | None = None
) -> list[str]:
    """The line saying that rehearsal ``asked`` (its option as typed, e.g. ("--preempt-after 30", "preempt"))
    never fired, what happened instead, and the fix; [] when it fired. ``state``: how the job ended."""
    option, kind = asked
    if outcome == DONE:
        return []
    ended = {"COMPLETED": "completed", "FAILED": "failed", "TIMEOUT": "hit its time limit"}.get(state, state.lower())
    if kind == "bad-node":
        why = f"the job {ended} after {seconds:.1f} s without checking its nodes"
        fix = "check that the job reaches its step (its setup: lines), or see the batch log"
    elif outcome == NOBODY:
        why = f"no program of rank {rank} was running then"
        fix = "give an --after at which the program runs (after its start-up), or see the batch log"
    elif outcome == GAVE_UP:
        why = "rank 0's program did not reach the step within --step-wait"
        fix = "give a smaller step or a longer --step-wait, or see the batch log"
    else:
        why = f"the job {ended} after {seconds:.1f} s, before it"
        fix = "use a smaller value"
        if kind == "preempt":  # --preempt-after or --preempt-at-step
            fix += " (a program that resumes from its own checkpoint, e.g. snapshot.pt, finishes sooner: remove it)"
    return [f"{option} never fired: {why}; nothing was rehearsed; {fix}"]


def bad_node_checked(log_dir: str, node: str) -> bool:
    """Did the node check of ``node`` fail in some run, as --bad-node asks (the run history's node-excluded)?"""
    from slurmgen import run_history

    return any(e.get("event") == run_history.NODE_EXCLUDED and e.get("node") == node for e in run_history.read(log_dir))
