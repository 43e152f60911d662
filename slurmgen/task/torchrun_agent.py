"""torchrun's agent, run in the entry point's own process: one line instead of tracebacks when the job ends, and one
shutdown of the workers, not several.

When Slurm ends or requeues a job, SIGTERM reaches every process of the step, the agent included, and often twice
(slurmstepd, and srun or a parent passing it on). torchrun's handler raises SignalException for each one
(torch/distributed/elastic/multiprocessing/api.py, _terminate_process_handler): the first starts its shutdown of the
workers (the signal, then up to --shutdown-timeout s for them to exit, then SIGKILL); a second one interrupts that
wait, so the agent exits while its workers may still be saving (and slurmstepd kills what is left of the step), and
both end as tracebacks in the node's log, three per node at every requeue. Here the first death signal starts the
shutdown and the ones after it are ignored; the exception ends the agent with one line, exit code 128 + signal.

An early preemption signal. The entry point blocks it in the agent before anything slow, and the workers inherit the
mask (signal(7)), but not the agent's pending signals (fork(2): "the child's set of pending signals is initially
empty"). So a signal that reached the step while the agent was still in its rendezvous, before it had started its
workers, stayed pending in the agent and no worker ever got it: under a loaded machine the job ran to its end,
"preempted after the program had finished its work". The agent now tells the batch shell that it is ready (the
ready file that ends the shell's hold of an early signal) only once its workers exist, and when it starts them it
takes a preemption signal pending in itself (sigtimedwait(2), no wait) and sends it to each of them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmgen.job_context.context import JobContext

TORCHRUN_MODULE = "torch.distributed.run"


# torch/distributed/elastic/agent/server/api.py: on a SignalException the agent shuts its workers down with
# PContext.close(death_sig), which waits torchrun's --shutdown-timeout (default 30 s) before SIGKILL; slurmgen's
# script sets it to the lead time (slurmgen/script/step.py).
WORKER_SHUTDOWN_TIMEOUT = 30


def shutdown_timeout(args: Sequence[str]) -> str:
    """torchrun's --shutdown-timeout among ``args`` (seconds, as written), else its default."""
    for i, arg in enumerate(args):
        if arg.startswith("--shutdown-timeout="):
            return arg.partition("=")[2]
        if arg == "--shutdown-timeout" and i + 1 < len(args):
            return args[i + 1]
    return str(WORKER_SHUTDOWN_TIMEOUT)


def agent_stopped_line(node: str, name: str, timeout: str) -> str:
    return (f"slurmgen: torchrun agent on {node} stopped by {name}: it passed {name} on to its workers and gave "
            f"them up to {timeout} s to end before SIGKILL")  # fmt: skip


def is_torchrun(command: Sequence[str]) -> bool:
    """`python3 -m torch.distributed.run ...`: the agent the rendered step starts (slurmgen.script.step)."""
    return (
        len(command) >= 3
        and os.path.basename(command[0]).startswith("python")
        and list(command[1:3]) == ["-m", TORCHRUN_MODULE]
    )


def once(handler: Callable[[int, Any], None], signals: Sequence[int]) -> Callable[[int, Any], None]:
    """``handler`` for the first of ``signals``; the others, and the same again, are ignored from then on."""

    def first(signum: int, frame: Any) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        handler(signum, frame)

    return first


def pass_pending(sig: signal.Signals | None, pids: Iterable[int], send: Callable[[int, int], None] = os.kill) -> bool:
    """Take ``sig`` if it is pending in this process (it came before the workers existed) and send it to each of
    ``pids``. Whether it was pending."""
    if sig is None or sig not in signal.sigpending() or signal.sigtimedwait([sig], 0) is None:
        return False
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # a worker that already ended needs nothing
            send(pid, sig)
    return True


def run(
    args: Sequence[str],
    err: Callable[[str], object],
    job: JobContext,
    preempt: signal.Signals | None = None,
    ready: Callable[[], None] = lambda: None,
) -> int:
    """torchrun with ``args`` in this process; its exit code. ``preempt``: the preemption signal the entry point
    blocked; ``ready``: tells the batch shell that the workers hold it (called at each start of the workers)."""
    import torch.distributed.run as torchrun
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    start = api.PContext.start

    def start_then_pass_on(context: Any) -> None:
        start(context)
        ready()
        if pass_pending(preempt, context.pids().values()):
            name = signal.Signals(preempt).name  # type: ignore[arg-type]  # not None: it was pending
            err(f"slurmgen: torchrun agent: {name} came before its workers started: passed on to them")

    api.PContext.start = start_then_pass_on  # type: ignore[method-assign,assignment]

    names = job.elastic_signals
    if "--signals-to-handle" in " ".join(args):
        names = tuple(next(a.partition("=")[2] for a in args if a.startswith("--signals-to-handle=")).split(","))
    death = [getattr(signal, n.strip()) for n in names if hasattr(signal, n.strip())]
    # PContext.start looks the handler up in its module when it registers it.
    api._terminate_process_handler = once(api._terminate_process_handler, death)  # type: ignore[assignment]
    sys.argv = [TORCHRUN_MODULE, *args]
    try:
        torchrun.main(list(args))
    except api.SignalException as exc:
        name = signal.Signals(exc.sigval).name
        node = job.node_name or os.uname().nodename
        err(agent_stopped_line(node, name, shutdown_timeout(args)))
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:  # a worker failed: torchrun's own summary (ranks, exit codes, error files)
        err(str(exc))
        return 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
