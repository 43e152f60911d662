"""A scenario: one point on every axis (program shape, launcher, size, handler, recovery, a sequence of
interruptions), which combinations make sense, and the hypothesis strategy that draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import assume
from hypothesis import strategies as st

# Preemption with a process group; Preemption alone; the program's own checkpoint; Lightning with slurmgen's callback
SHAPES = ("pg", "nopg", "own", "lightning")
LAUNCHERS = ("srun", "torchrun")
SIZES = ((1, 1), (1, 2), (2, 1), (2, 2))  # nodes x ranks per node
HANDLERS = ("auto", "runtime", "requeue", "program")

# What can happen to a run, and how the local place makes it happen:
#   crash           `--kill-rank R --at-step K`: SIGKILL of rank R's program; it is gone before its peers
#   crash_late      the program's --fail-rank R --fail-at STEP --linger: it raises once, its peers die of it first
#   bug             the same raise at the same step on every start: a failure that repeats
#   hang            `--hang-rank R --at-step K`: SIGSTOP of rank R's program, for the hang watchdog
#   preempt_first   `--preempt-after 1`: before the program's first step (its start-up takes longer)
#   preempt_save    `--preempt-at-step K` into a program that saves every step: the signal lands beside a save
#   preempt_restart `--kill-rank R --at-step K` and `--preempt-at-step K+2`, the second counted from the restarted
#                   program's progress: the signal comes while the step restarts
#   requeue         `slurmgen requeue JOB` by hand once rank 0 printed STEP k
#   cancel_resume   `slurmgen cancel JOB` once rank 0 printed STEP k, then `slurmgen resume JOB`
#   bad_node        `--bad-node 2`: node 2 fails its health check before the step
#   time_limit      a time limit of two minutes, shorter than the program's work
KINDS = (
    "crash",
    "crash_late",
    "bug",
    "hang",
    "preempt_first",
    "preempt_save",
    "preempt_restart",
    "requeue",
    "cancel_resume",
    "bad_node",
    "time_limit",
)
PREEMPTIONS = ("preempt_first", "preempt_save", "preempt_restart", "time_limit")
REHEARSALS = ("crash", "hang", "preempt_restart")  # the kinds that take `--kill-rank`/`--hang-rank` and `--at-step`
FAILURES = ("crash", "crash_late", "bug", "hang", "preempt_restart")  # a rank that fails on its own


@dataclass(frozen=True)
class Interruption:
    kind: str
    rank: int = 0
    at: float = 0.0  # a step of rank 0's program: for the rehearsals, the program's failures and the acts by hand

    def words(self) -> str:
        return f"{self.kind}(rank={self.rank}, at={self.at:g})"


@dataclass(frozen=True)
class Scenario:
    shape: str = "pg"
    launcher: str = "srun"
    nodes: int = 1
    tasks: int = 1
    handler: str = "auto"
    recovery: bool = True
    interruptions: tuple[Interruption, ...] = field(default_factory=tuple)
    name: str = ""
    extra: str = ""  # more spec lines (a named case's `setup:`); one that sets `recovery:` replaces the axis's

    @property
    def world(self) -> int:
        return self.nodes * self.tasks

    def kinds(self) -> tuple[str, ...]:
        return tuple(i.kind for i in self.interruptions)

    def words(self) -> str:
        said = ", ".join(i.words() for i in self.interruptions) or "none"
        return (f"{self.shape} {self.launcher} {self.nodes}x{self.tasks} handler={self.handler} "
                f"recovery={'on' if self.recovery else 'off'} interruptions=[{said}]")  # fmt: skip


def why_invalid(s: Scenario, place: str = "local") -> str | None:
    """Why a combination is no scenario at ``place`` ("local": the emulator; "cluster": a real Slurm), None when
    it is one. Filtered out, never failed."""
    kinds = s.kinds()
    if len(set(kinds)) != len(kinds):
        return "an interruption kind twice"
    if sum(k in REHEARSALS for k in kinds) > 1:
        return "--kill-rank and --hang-rank take one --at-step: one rehearsal of a rank per run"
    if sum(k in PREEMPTIONS for k in kinds) > 1:
        return "one preemption signal per run"
    if any(i.rank >= s.world for i in s.interruptions):
        return "a rank the job does not have"
    if "crash_late" in kinds and (s.world < 2 or s.shape == "nopg"):
        return "a rank can only outlive peers it has, joined by a process group"
    if "bug" in kinds and len(kinds) > 1:
        return "a repeating bug ends the job: nothing after it happens"
    if "hang" in kinds and (not s.recovery or s.shape == "own"):
        return "a hang is found by the watchdog of recovery, from Preemption's progress marks"
    if "preempt_restart" in kinds and not s.recovery:
        # without recovery the kill fails the job, and the signal timed from the dying step's progress races that
        # end: the job fails (the rehearsal is missed), or a requeueing handler takes the signal first and the
        # requeued run completes; both are true stories, neither is a preemption during a restart
        return "a preemption during a restart needs recovery to restart the step"
    if "bad_node" in kinds and (s.nodes < 2 or not s.recovery):
        return "a bad node needs a second node and recovery's health check"
    if any(k in PREEMPTIONS for k in kinds):
        if s.handler == "program":
            return "handler program: the program handles the signal itself, and this one has no handler"
        if s.handler == "runtime" and s.shape == "own":
            return "handler runtime needs Preemption"
    if s.shape == "lightning" and s.launcher == "torchrun":
        return "Lightning runs its own DDP processes from the tasks srun starts; torchrun's agent is not in the engine"
    if "requeue" in kinds and place == "local":
        # `slurmgen requeue local-N` refuses: a local job's runner requeues it when the job asks (Preemption, the
        # batch shell), and `slurmgen resume` runs it again; the kind waits for a place with a scheduler
        return "the local emulator has no requeue by hand"
    if "cancel_resume" in kinds and len(kinds) > 1:
        return "a cancel ends the job's story; its resume is the last act"
    if "time_limit" in kinds and (s.launcher == "torchrun" or s.world > 1):
        return "kept to srun 1x1: the time limit's path does not depend on the launcher or size, and costs minutes"
    return None


def interruptions(world: int) -> st.SearchStrategy[tuple[Interruption, ...]]:
    one = st.builds(
        Interruption,
        kind=st.sampled_from(KINDS),
        rank=st.integers(min_value=0, max_value=world - 1),
        # steps of rank 0's program, below STEADY_STEPS (local_place.py) by more than the second a progress mark
        # may lag (10 steps)
        at=st.sampled_from((12.0, 20.0, 30.0)),
    )
    return st.lists(one, min_size=1, max_size=2).map(tuple)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes, tasks = draw(st.sampled_from(SIZES))
    s = Scenario(
        shape=draw(st.sampled_from(SHAPES)),
        launcher=draw(st.sampled_from(LAUNCHERS)),
        nodes=nodes,
        tasks=tasks,
        handler=draw(st.sampled_from(HANDLERS)),
        recovery=draw(st.booleans()),
        interruptions=draw(interruptions(nodes * tasks)),
    )
    reason = why_invalid(s)
    assume(reason is None)  # hypothesis filters it: an invalid combination is no failure
    return s
