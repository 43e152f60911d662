"""The task's supervisor: the entry point stays as a thin parent of the program instead of exec'ing it.

Why a parent: a program that installs its preemption handler late (a framework, after seconds of imports) must not
die of an early signal, and a signal must never be silently lost. The kernel shows which signals a process
catches, blocks and has pending (/proc/<pid>/status: SigCgt, SigBlk, SigPnd; proc(5)); only a process outside the
program can watch that and act on it. The parent also gives the program a log of its own and tells the batch
shell which task failed first, with its own exit code.

What reaches whom: slurmstepd signals every process of a step (proctrack, src/plugins/proctrack/linuxproc:
kill_proc_tree; the cgroup plugins signal the whole cgroup), so the program gets Slurm's signals directly and the
supervisor must not pass them on a second time. A signal from anyone else (torchrun's agent shutting its workers
down, a user's kill) reaches only the supervisor: it forwards those. `sigwaitinfo(2)` says who sent a signal
(si_pid): the step's manager (slurmstepd, or the local fake srun; SLURMGEN_STEP_PID) or one of its ancestors
means the program has it already.

The preemption signal, by `preemption.handler` (the child's disposition is set before exec and survives it,
signal(7) and execve(2)):
- runtime, auto: blocked; an early one stays pending until Preemption installs its handler and unblocks it;
- program, a Python program (slurmgen.task.python_hook): blocked with the default action, so ``signal.getsignal``
  says SIG_DFL and a framework that installs its handler only where none is set does; a start-up hook unblocks the
  signal once the program installs a handler, and an early one, pending, reaches it then;
- program, any other program: ignored until the program installs a handler (an early one is discarded, not
  fatal); when one came while /proc showed no handler, the supervisor sends it again once SigCgt shows one;
- requeue: ignored; the batch shell stops the step with SIGTERM and requeues the job.

Cost (bench/supervisor.py, on the 2-core test machine): about 14 MiB RSS per task, and about 60 ms more before the
program starts. Standard library only; never torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from slurmgen import contract, exit_codes, trust
from slurmgen.job_context.context import JobContext
from slurmgen.task.python_hook import hook_env, hook_path, hooks_python
from slurmgen.task.signal_block import SUPERVISED

if TYPE_CHECKING:
    import threading

    from slurmgen.task.program_error import Raised

REPEAT_WINDOW = 5.0  # s: the same signal from a parent this soon after the step's own is that parent passing it on
WATCH_INTERVAL = 0.05  # s between looks at /proc while a preemption signal waits for the program's handler
# s a supervisor waits, after its program died of a stopping signal, for its own copy of that signal (_late_stop)
LATE_STOP_WAIT = 1.0
PR_SET_PTRACER = 0x59616D61  # linux/prctl.h: "Yama"
# Signals that end a task on purpose: a task that exits non-zero after one is not a failure of its own.
_STOPPING = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR2})


@dataclass(frozen=True)
class TaskSetup:
    """What the entry point decided for this task."""

    command: tuple[str, ...]
    preempt: signal.Signals | None  # None: preemption handling is off
    handler: str  # contract.HANDLERS, or "" when off
    rank: int | None
    node: str
    log_path: str | None  # the rank's own log (None outside slurmgen's script)
    stepwide: frozenset[int]  # pids whose signals reached every process of the step: the manager and its ancestors
    env: Mapping[str, str] = field(default_factory=dict)
    hooked: bool = False  # handler program, a Python program: the preemption signal starts blocked (python_hook)
    stacks_fd: int | None = None  # the program inherits it for its own stack dumps (task/program_stacks.py)
    error_fd: int | None = None  # the program's hook writes its uncaught exception there (task/program_error.py)
    output_fd: int | None = None  # the program's stdout: a pipe rank 0's supervisor reads (task/output_progress.py)
    job: JobContext = field(default_factory=lambda: JobContext.from_environ({}))  # read once at the entry point

    @property
    def run(self) -> int:
        """This run's number in the run history."""
        return self.job.run


def child_disposition(handler: str, preempt: signal.Signals | None, hooked: bool = False) -> str | None:
    """How the program starts with the preemption signal: "block", "ignore" or None (as inherited)."""
    if preempt is None:
        return None
    if handler == contract.HANDLER_PROGRAM and hooked:
        return "block"  # python_hook unblocks it once the program installs its handler
    if handler in (contract.HANDLER_PROGRAM, contract.HANDLER_REQUEUE):
        return "ignore"
    return "block"


def parse_status(text: str) -> dict[str, int]:
    """The signal masks of /proc/<pid>/status (SigQ aside): {"SigCgt": mask, ...}; bit N-1 is signal N."""
    masks: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":\t")
        if key in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt"):
            masks[key] = int(value.strip(), 16)
    return masks


def has(mask: int, sig: int) -> bool:
    return bool(mask >> (sig - 1) & 1)


def ancestry(pid: int, parent_of: Callable[[int], int | None]) -> frozenset[int]:
    """``pid`` and its ancestors up to init."""
    found: set[int] = set()
    while pid > 0 and pid not in found:
        found.add(pid)
        pid = parent_of(pid) or 0
    return frozenset(found)


def proc_parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return int(handle.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Routing:
    """The supervisor's memory of the signals it got; `route` decides what each one calls for."""

    plan: TaskSetup
    received: list[tuple[int, bool, float]] = field(default_factory=list)  # (signal, step-wide, when)
    owed: int | None = None  # a preemption signal the program could not take yet (program mode)

    def route(self, sig: int, sender: int, now: float, child_catches: Callable[[int], bool]) -> bool:
        """Record a signal; True when it must be sent to the program (it did not reach it)."""
        # Not on the way to starting the program: the policy's modules (and typing, which the policy package
        # imports) are a tenth of the supervisor's start-up CPU (bench/startup.py); supervise() loads them once the
        # program is released, and only a signal pending before that imports them here.
        from slurmgen.interruption import decide
        from slurmgen.interruption.running import TaskSignalFacts

        recent = any(s == sig and wide and now - t <= REPEAT_WINDOW for s, wide, t in self.received)
        stepwide = self.remember(sig, sender, now)
        preemption = sig == self.plan.preempt
        # Whether the program catches it is asked only where it matters (a /proc read): handler program's signal.
        asks = preemption and self.plan.handler == contract.HANDLER_PROGRAM
        route = decide(
            TaskSignalFacts(
                preemption_signal=preemption,
                handler=self.plan.handler,
                program_catches=child_catches(sig) if asks else True,
                hooked=self.plan.hooked,
                stepwide=stepwide,
                recent=recent,
            )
        )
        if route.owed:
            self.owed = sig  # watched until the program has a handler
        return route.forward

    def remember(self, sig: int, sender: int, now: float) -> bool:
        """Record a signal and who sent it; True when it came step-wide (the program has it too)."""
        stepwide = sender in self.plan.stepwide
        self.received.append((sig, stepwide, now))
        return stepwide

    def stops(self, sig: int) -> bool:
        """Whether ``sig`` ends a task on purpose (a stop, or the preemption signal)."""
        return sig in _STOPPING or sig == self.plan.preempt

    def stopped_on_purpose(self) -> bool:
        return any(self.stops(s) for s, _, _ in self.received)


def say_to(fd: int | None) -> Callable[[str], None]:
    def say(line: str) -> None:
        data = f"slurmgen: {line}\n".encode()
        with contextlib.suppress(OSError):
            os.write(fd if fd is not None else 2, data)

    return say


def child_status(pid: int) -> dict[str, int]:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            return parse_status(handle.read())
    except OSError:
        return {}


def supervise(plan: TaskSetup, say_err: Callable[[str], None]) -> int:
    """Start the program, route signals to it until it ends, and end as it did. Returns its exit code (a program
    ended by a signal ends the supervisor by the same signal)."""
    import shutil

    log_fd = _open_log(plan.log_path, say_err)
    say = say_to(log_fd) if log_fd is not None else say_err
    path = shutil.which(plan.command[0], path=plan.env.get("PATH"))
    if path is None:
        there = "/" in plan.command[0] and os.path.exists(plan.command[0])
        say(f"cannot run {plan.command[0]!r}: {'not executable' if there else 'command not found'}")
        return _record_exit(plan, 126 if there else 127)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the program behind our back
    python = hooks_python(path, plan.command)
    if plan.handler == contract.HANDLER_PROGRAM and plan.preempt is not None and python:
        plan = replace(plan, hooked=True, env=hook_env(plan.env, plan.preempt))
    watched = set(SUPERVISED) | ({plan.preempt} if plan.preempt else set())
    # the hang watchdog (recovery.hang_timeout): docs/reliability.md, "When things fail"
    from slurmgen.task import watchdog

    stacks = None
    if python and watchdog.watches(plan.job, plan.rank):
        from slurmgen.task.program_stacks import ProgramStacks

        try:
            stacks = ProgramStacks()
            plan = replace(plan, env=hook_path(stacks.env(plan.env)), stacks_fd=stacks.fd)
        except OSError as exc:  # no temporary file: the watchdog still runs, with py-spy only
            say(f"no file for the program's own stack dumps ({exc.strerror}); a hang's stacks need py-spy")

    errors = None
    if python and plan.job.log_dir and plan.rank is not None:
        from slurmgen.task.program_error import ProgramError

        try:
            errors = ProgramError()
            plan = replace(plan, env=hook_path(errors.env(plan.env)), error_fd=errors.fd)
        except OSError:  # no temporary file: the task that failed first is told by exit codes alone
            errors = None
    if extra := watchdog.nccl_trace_env(plan.job, plan.env):
        plan = dataclasses.replace(plan, env={**plan.env, **extra})
    # A signal that came before the fork is pending here and not in the child (fork(2): the child's pending set
    # starts empty), even when slurmstepd sent it to every process of the step. So the child waits, every signal
    # still blocked, while this process takes what is pending and sends it on: one that came after the fork is
    # pending in the child already, and the same standard signal sent again merges with it (signal(7)).
    output = None
    if plan.job.progress_pattern:  # spec section progress: (imported only then: every task's start pays for imports)
        from slurmgen.task.output_progress import reads_output

        output = os.pipe() if reads_output(plan.job, plan.rank) else None
    if output is not None:
        plan = replace(plan, output_fd=output[1])
    go_read, go_write = os.pipe()
    supervisor_pid = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(go_write)
        _exec_child(plan, path, log_fd, watched, supervisor_pid, go_read)
    os.close(go_read)
    relaying = steps = None
    if output is not None:
        os.close(output[1])  # the program holds the only write end: its end is the pipe's end of file
        from slurmgen.task.output_progress import start as relay_output

        relaying, steps = relay_output(plan.job, output[0], log_fd if log_fd is not None else 1)
    routing = Routing(plan)
    for sig in _drain(watched):
        if sig != signal.SIGCHLD and routing.route(sig, -1, time.monotonic(), lambda s: False):
            _send(child, sig)
    os.close(go_write)  # the child's read returns: it sets its signals and execs
    # The policy that routes signals: loaded now that the program is on its way, not before its start
    # (bench/startup.py), and before the wait loop's first signal needs it.
    import slurmgen.interruption.running  # noqa: F401

    own = None if stacks is None else functools.partial(stacks.dump, child, caught_by(child))
    began = time.time()
    watching = watchdog.start(plan.job, plan.rank, child, say, own)
    raises = None if errors is None else watch_raise(plan, routing)

    def settle() -> None:
        """Once the program is reaped, before this process ends as it did: the rest of its output, the last
        progress sample, and the leave of the node's directory (a stop or a kill ends the program by a signal, and
        this process by the same one, which runs no `finally`)."""
        if relaying is not None:
            from slurmgen.task.output_progress import JOIN_WAIT

            relaying.join(JOIN_WAIT)  # its end recorded the last sample of the steps the output said
        elif plan.rank == 0:
            record_unsaid_last(plan.job, began)
        if watching is not None:
            watching.set()  # its last poll's note in the node's directory comes before the leave, not after it
        if raises is not None:
            raises.set()
        watchdog.leave_node(plan.job, plan.rank, began)

    saves = None
    if plan.job.checkpoint:  # the program's own saves (spec field checkpoint.path), on rank 0 only
        from slurmgen.task import checkpoint_watch

        saves = checkpoint_watch.start(plan.job, plan.rank, plan.job.resumed, say,
                                       None if steps is None else steps.lines)  # fmt: skip
    try:
        return _wait_loop(plan, routing, child, watched, say, settle)
    finally:
        if watching is not None:
            watching.set()
        if raises is not None:
            raises.set()
        if saves is not None:
            saves.set()
        # the node's last task removes the node's directory (settle did, once the program was reaped; here for an
        # error of this process's own; a second leave finds no directory and does nothing)
        watchdog.leave_node(plan.job, plan.rank, began)
        if stacks is not None:
            stacks.close()
        if errors is not None:
            errors.close()


def _open_log(path: str | None, say: Callable[[str], None]) -> int | None:
    if not path:
        return None
    try:
        return trust.open_write(path, mode=0o644)  # never through a link planted in a shared log directory
    except (OSError, trust.Untrusted) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        say(f"cannot open the rank log {path} ({why}); the program writes to the node log instead")
        return None


def _drain(watched: set[int]) -> list[int]:
    got: list[int] = []
    while (info := signal.sigtimedwait(watched, 0)) is not None:
        got.append(info.si_signo)
    return got


def _exec_child(plan: TaskSetup, path: str, log_fd: int | None, watched: set[int], parent: int, go: int) -> None:
    """In the forked child: wait for the supervisor's go, die with it, write to the rank log, set the preemption
    signal's disposition, unblock the rest, exec. Never returns."""
    code = 127
    try:
        while True:
            try:
                os.read(go, 1)  # end of file: the supervisor closed its end (or died: then getppid tells)
                break
            except InterruptedError:  # pragma: no cover - every signal is blocked here; PEP 475 retries anyway
                continue
        os.close(go)
        import ctypes

        # PR_SET_PDEATHSIG (prctl(2)): if the supervisor is killed (torchrun's agent SIGKILLs its workers), the program
        # must not run on unsupervised outside the step's process tree.
        from slurmgen.task import watchdog  # loaded by the supervisor already

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)
        if watchdog.watches(plan.job, plan.rank):
            # PR_SET_PTRACER (prctl(2)): the hang watchdog's py-spy is this supervisor's child, the program's
            # sibling, which Yama's ptrace_scope=1 refuses to let attach; a declared tracer's descendants may
            # (Documentation/admin-guide/LSM/Yama.rst). It lasts across the exec; without Yama it fails, harmlessly.
            libc.prctl(PR_SET_PTRACER, parent, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(code)
        if log_fd is not None:
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
        if plan.output_fd is not None:
            os.dup2(plan.output_fd, 1)  # the supervisor passes it on to the log, reading the steps on the way
        if plan.stacks_fd is not None:
            os.set_inheritable(plan.stacks_fd, True)
        if plan.error_fd is not None:
            os.set_inheritable(plan.error_fd, True)
        keep = set()
        how = child_disposition(plan.handler, plan.preempt, plan.hooked)
        if plan.preempt is not None and how == "ignore":
            signal.signal(plan.preempt, signal.SIG_IGN)
        elif plan.preempt is not None and how == "block":
            keep.add(plan.preempt)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched - keep)
        os.execve(path, list(plan.command), dict(plan.env))  # noqa: S606 (an argv list: no shell)
    except OSError as exc:
        code = 126
        os.write(2, f"slurmgen: cannot run {plan.command[0]!r}: {exc.strerror or exc}\n".encode())
    finally:
        os._exit(code)


def _pending(pid: int, sig: int) -> bool:
    masks = child_status(pid)
    return has(masks.get("SigPnd", 0) | masks.get("ShdPnd", 0), sig)


def _send(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def caught_by(pid: int) -> Callable[[int], bool]:
    """Whether ``pid`` catches a signal now (/proc SigCgt)."""
    return lambda sig: has(child_status(pid).get("SigCgt", 0), sig)


def record_unsaid_last(job: JobContext, began: float) -> None:
    """Rank 0's last progress sample, from its node mark, when its program was killed before it recorded one
    (progress_sample.record_from_mark); nothing for a program that marked no step in this start (``began``)."""
    from slurmgen.progress_mark import unrecorded_mark
    from slurmgen.progress_sample import record_from_mark

    mark = unrecorded_mark(job, 0)
    if mark is None or mark[2] < began:
        return
    step, steps, when = mark
    with contextlib.suppress(OSError, trust.Untrusted):  # a full or gone log directory: the sample is all it costs
        record_from_mark(job, steps, step, when)


def _wait_loop(
    plan: TaskSetup,
    routing: Routing,
    child: int,
    watched: set[int],
    say: Callable[[str], None],
    settle: Callable[[], None] = lambda: None,
) -> int:
    catches = caught_by(child)
    while True:
        info = signal.sigtimedwait(watched, WATCH_INTERVAL) if routing.owed else signal.sigwaitinfo(watched)
        if info is not None and info.si_signo != signal.SIGCHLD:
            sig = info.si_signo
            had_owed = routing.owed
            if routing.route(sig, info.si_pid, time.monotonic(), catches):
                _send(child, sig)
            elif routing.owed and not had_owed:
                name = signal.Signals(sig).name
                then = "it waits, blocked, until it does" if plan.hooked else "it is sent again once it does"
                say(f"{name} came before the program installed a handler for it; {then}")
        if routing.owed and catches(routing.owed):
            name = signal.Signals(routing.owed).name
            if not plan.hooked:
                _send(child, routing.owed)
                say(f"{name} sent to the program, whose handler is now installed")
                routing.owed = None
            elif not _pending(child, routing.owed):  # the hook unblocked it: the kernel delivered it
                say(f"{name} sent to the program, whose handler is now installed (it waited there, blocked)")
                routing.owed = None
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            settle()
            return _finish(plan, routing, status, say, watched)


def _finish(plan: TaskSetup, routing: Routing, status: int, say: Callable[[str], None], watched: set[int]) -> int:
    code = os.waitstatus_to_exitcode(status)  # negative: killed by that signal
    if code < 0 and routing.stops(-code) and not routing.stopped_on_purpose():
        _late_stop(routing, watched)
    if routing.owed:
        say(f"the program ended before installing a handler for {signal.Signals(routing.owed).name}")
    exit_code = 128 - code if code < 0 else code
    raised = _raised(plan)
    if raised is not None and exit_code and _raised_first(raised, routing):
        # It raised before the step's signal ended it (its atexit hooks were still running): the failure is its
        # own, with the code an uncaught exception gives (1), not the signal's that cut its exit short.
        _record_exit(plan, exit_codes.EXIT_FAILURE, None, raised)  # CPython exits 1 after an uncaught exception
    elif exit_code and not routing.stopped_on_purpose():
        _record_exit(plan, exit_code, -code if code < 0 else None, raised)
    if code < 0:
        _die_by(-code)
    return exit_code


def _late_stop(routing: Routing, watched: set[int]) -> None:
    """Take a stop signal that is on its way to this process, waiting LATE_STOP_WAIT at most.

    slurmstepd signals a step's processes one at a time, the deepest first: kill_proc_tree
    (src/plugins/proctrack/linuxproc/kill_tree.c) builds its list by putting each child before its parent. So a
    program killed by the step's SIGTERM (a requeue, scancel, the time limit) can be reaped here before this
    process's own copy arrives, on a loaded node most of all; without waiting for it, the stop would be recorded as
    the program's own failure and the batch log would name it as the task that failed first. A program killed by
    someone who signalled it alone gets no copy here: that is still its failure, recorded after the wait."""
    deadline = time.monotonic() + LATE_STOP_WAIT
    wanted = watched - {signal.SIGCHLD}
    while (left := deadline - time.monotonic()) > 0:
        info = signal.sigtimedwait(wanted, left)
        if info is None:
            return
        routing.remember(info.si_signo, info.si_pid, time.monotonic())
        if routing.stops(info.si_signo):
            return


RAISE_POLL = 0.25  # seconds between two looks at the program's error file (a pread of node memory)


def watch_raise(plan: TaskSetup, routing: Routing) -> threading.Event:
    """Record the program's uncaught exception in the run history as soon as its start-up hook wrote it (event
    `raised`), not only at its end: a rank that raised can outlive its task, killed or left behind once the step
    ends (torchrun's agent is the task, and a worker that lingers in its atexit hooks can outlast it), and the
    batch shell decides at the step's end from the records there are, which then named a casualty that exited
    first. An exception raised after a stop signal is the stop's doing (_raised_first) and is not recorded. Set
    the returned event to stop watching."""
    import threading  # here, as the watchdog's: the entry's other modes import this module without a thread

    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(RAISE_POLL):
            raised = _raised(plan)
            if raised is None:
                continue
            if _raised_first(raised, routing):
                _record_raise(plan, raised)
            return

    threading.Thread(target=watch, name="slurmgen-raise-watch", daemon=True).start()
    return stop


def _record_raise(plan: TaskSetup, raised: Raised) -> None:
    from slurmgen import run_history

    fields = {"rank": plan.rank, "node": plan.node, "raised": raised.error, "raised_at": round(raised.time, 3),
              "log": plan.log_path}  # fmt: skip
    with contextlib.suppress(OSError, trust.Untrusted):  # the exit's record still says it
        run_history.append(str(plan.job.log_dir), f"task-{plan.rank}", run_history.RAISED, plan.run, time.time(),
                           **fields)  # fmt: skip


def _raised_first(raised: Raised, routing: Routing) -> bool:
    """Whether the program raised before any stopping signal reached this task: an exception raised after one
    (a handler that raises on SIGTERM) is the stop's doing, not a failure of its own."""
    stops = [at for sig, _, at in routing.received if routing.stops(sig)]
    if not stops:
        return True
    raised_at = time.monotonic() - (time.time() - raised.time)  # the hook's epoch time on this clock
    return raised_at < min(stops)


def _raised(plan: TaskSetup) -> Raised | None:
    """The uncaught exception the program's hook recorded (task/program_error.py), if any."""
    if plan.error_fd is None:
        return None
    from slurmgen.task.program_error import MAX_BYTES, parse

    try:
        return parse(os.pread(plan.error_fd, MAX_BYTES, 0))
    except OSError:
        return None


def _record_exit(plan: TaskSetup, code: int, sig: int | None = None, raised: Raised | None = None) -> int:
    """A failure of the task's own (no one asked it to stop): the run history's task-exit event, which the batch
    shell reads to name the task that failed first and give the job its exit code; with the exception the
    program raised, and when (`raised`, `raised_at`), when its hook recorded one."""
    log_dir = plan.job.log_dir
    if log_dir and plan.rank is not None:
        from slurmgen import run_history

        fields: dict[str, object] = {"rank": plan.rank, "node": plan.node, "exit_code": code, "log": plan.log_path}
        if sig is not None:
            fields["signal"] = signal.Signals(sig).name.removeprefix("SIG")
        if raised is not None:
            fields.update(raised=raised.error, raised_at=round(raised.time, 3))
        run = plan.run
        # On failure the exit code still reaches srun; only the name of the failing task is lost.
        with contextlib.suppress(OSError):
            run_history.append(log_dir, f"task-{plan.rank}", run_history.TASK_EXIT, run, time.time(), **fields)
    return code


def _die_by(sig: int) -> None:
    """End this process by ``sig``, as the program ended: srun then reports the same signal for the task."""
    import resource

    with contextlib.suppress(OSError, ValueError):  # if it cannot, the task still exits 128 + sig
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the program dumped core if it was going to
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # their action cannot be changed (signal(7))
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)


def node_name(job: JobContext) -> str:
    return job.node_name or socket.gethostname()


def task_setup(
    command: Sequence[str], env: Mapping[str, str], rank: int | None, preempt: signal.Signals | None, job: JobContext
) -> TaskSetup:
    """The plan for this task from its job context (pure but for reading /proc for the step's ancestry); ``env`` is
    the environment the program gets."""
    log_dir = job.log_dir
    manager = job.step_pid or ""
    stepwide = ancestry(int(manager), proc_parent) if manager.isdigit() else frozenset()
    return TaskSetup(
        command=tuple(command),
        preempt=preempt,
        handler=job.handler if preempt is not None else "",
        rank=rank,
        node=node_name(job),
        log_path=os.path.join(log_dir, contract.rank_log_name(rank)) if log_dir and rank is not None else None,
        stepwide=stepwide,
        env=dict(env),
        job=job,
    )
