"""The interruption policy's vocabulary: the events it decides on, the phases of a run it decides in, and the
outcomes and actions it answers with. Enums, so a misspelt outcome is an AttributeError and not a silent `else`.

StrEnum: every value is also the string it always was, so the run history (JSON), the messages and the tests
that read them stay as they were (a run-end's `ended` is still "completed", "requeued", ...). It is written here
rather than taken from the standard library's enum.StrEnum (new in 3.11) because the batch shell's helper and the
task supervisor import this module on the host's or image's Python, from 3.9 up.

Standard library only, no other import.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """enum.StrEnum of Python 3.11 for 3.9 and 3.10: str() and format() give the value on every version.

    A plain ``(str, Enum)`` member prints as ``Phase.RUNNING`` under str() on every version and under format()
    from 3.12 (the enum docs' "Notes" on StrEnum and IntEnum's __str__ changes), so both are str's own.
    """

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)


class Event(Enum):
    """What the policy is asked about: one per question, each with its facts type (slurmgen.interruption.decide)."""

    SIGNAL_BEFORE_STEP = "signal-before-step"  # TERM or USR2 reached the batch shell before the step (re)started
    PREEMPTION_SIGNAL = "preemption-signal"  # the spec's preemption signal reached the batch shell
    TASK_SIGNAL = "task-signal"  # a signal reached a task's supervisor
    STOP = "stop"  # rank 0 stops the program (Preemption.save_and_exit)
    REQUEUE = "requeue"  # someone asks for a requeue of this job: within which budget, how
    STEP_FAILED = "step-failed"  # the step ended non-zero (a crash or a hang) inside a running allocation
    NODES = "nodes"  # a start of the step is due: which nodes it runs on
    WATCH = "watch"  # the preemption watcher looked at the job once
    STEP_ENDED = "step-ended"  # the step ended for good: whether and how the job comes back
    RUN_ENDED = "run-ended"  # that requeue was tried: how the run ends (exit code, resume state)


class Phase(StrEnum):
    """Where a run is when a signal reaches its batch shell."""

    STARTING = "starting"  # before the first start of the step
    RESTARTING = "restarting"  # between a failed start of the step and its next start (recovery.max_restarts)
    RUNNING = "running"  # the step runs


class Ended(StrEnum):
    """How a run ended, as the batch shell records it (run-end's `ended`) and `slurmgen history` shows it."""

    COMPLETED = "completed"  # the work is done: the resume state is removed
    STOPPED = "stopped"  # stopped before its work was done and not requeued (USR2, TERM, a failed requeue, a budget)
    REQUEUED = "requeued"  # it comes back
    FAILED = "failed"  # the program failed on its own
    UNSURE = "unsure"  # exit 0, but Slurm could not be asked whether it was requeued: the state is kept


class RequeueHow(StrEnum):
    """How the batch shell brings the job back (slurmgen/requeue.py carries it out)."""

    RUNNING = "running"  # `scontrol requeue Incomplete` while the job runs
    ENDED = "ended"  # a plain `scontrol requeue` for a job Slurm is ending (PreemptMode=CANCEL)
    # Not a requeue: a new job continues the work from this job's state (batch/continuation.py), where Slurm would
    # end a requeued run PREEMPTED anyway (CANCEL with a grace time, 24.05 and later).
    CONTINUE = "continue"


class RequeueRoute(StrEnum):
    """The way a requeue goes, decided before anything is run (slurmgen.interruption.requeue_route.route_requeue)."""

    NOT_SLURM = "not-slurm"  # not inside a Slurm job: nothing to requeue
    REFUSED = "budget"  # over its budget: not requeued, recorded as refused
    ASK_BATCH_SHELL = "batch-shell"  # leave a marker: the batch shell requeues (or continues) after the step
    SCONTROL_RUNNING = "scontrol-incomplete"  # `scontrol requeue Incomplete`: acts only while the job runs
    SCONTROL_ENDED = "scontrol"  # a plain `scontrol requeue`: takes back a completing or finished job


class RequeueResult(StrEnum):
    """What came of a requeue that was tried (requeue.RequeueOutcome.action)."""

    REQUEUED = "requeued"
    CONTINUED = "continued"  # a continuation job was submitted (RequeueHow.CONTINUE)
    BATCH_SHELL = "batch-shell"  # left to the batch shell (a marker)
    BUDGET = "budget"  # refused over budget
    DISABLED = "disabled"  # the job was submitted with --no-requeue
    NOT_RUNNING = "not-running"  # the job was not running (requeued or ending already): nothing from here
    NOT_SLURM = "not-slurm"
    FAILED = "failed"  # Slurm did not take it (after the retries)


class SignalRoute(StrEnum):
    """What the preemption signal calls for in the batch shell (by preemption.handler)."""

    FORWARD = "forward"  # the program acts on it
    STOP = "stop"  # the batch shell stops the step and requeues
    WAIT = "wait"  # auto, and the program has not said yet whether it takes part: forward, stop if it stays silent


class BeforeStep(StrEnum):
    """What the batch shell does with the signals it holds at a start of the step."""

    START = "start"  # start the step (it is given the signals that are not TERM or USR2)
    END = "end"  # do not start it: go to the run's end, which decides how the job ends (a stop while restarting)
    EXIT = "exit"  # leave now with a code: no step ran in this run, nothing to requeue or record


class WatchStep(StrEnum):
    """What the preemption watcher does after one look at the job."""

    SIGNAL = "signal"  # act as if the notice had come: send the preemption signal to the batch shell itself
    WAIT = "wait"  # nothing to do yet: ask Slurm again later
    DONE = "done"  # stop asking: the notice came, or there is no preemption to wait for any more


class RestartCause(StrEnum):
    """Why the step starts again inside the allocation, or why it does not."""

    CRASH = "crash"
    HANG = "hang"  # the hang watchdog ended the step (task/watchdog.py)
    REPEATED = "repeated"  # not restarted: the same error at the same saved state, a bug and not the machine
