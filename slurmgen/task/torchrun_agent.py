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

`launcher: accelerate` runs `accelerate launch` here the same way: its multi_gpu_launcher calls torchrun's
`torch.distributed.run.run` in its own process (accelerate/commands/launch.py), so the same agent, the same one
shutdown and the same hand-over of an early signal apply. accelerate passes torchrun neither --signals-to-handle
nor --shutdown-timeout; torchrun reads both from PET_SIGNALS_TO_HANDLE and PET_SHUTDOWN_TIMEOUT when they are not
given (torch/distributed/argparse_util.py, `env`), which the agent sets from its job context. So are the node's
rank and the rendezvous, which accelerate takes as --machine_rank, --main_process_ip and --main_process_port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slurmgen.job_context.context import JobContext

TORCHRUN_MODULE = "torch.distributed.run"
ACCELERATE_MODULE = "accelerate.commands.launch"
# torch/distributed/argparse_util.py, `env`: an option's value from PET_<DEST> when the command line has none.
PET_SIGNALS = "PET_SIGNALS_TO_HANDLE"
PET_SHUTDOWN = "PET_SHUTDOWN_TIMEOUT"


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


def is_torchrun(command: Sequence[str], module: str = TORCHRUN_MODULE) -> bool:
    """`python3 -m torch.distributed.run ...`: the agent the rendered step starts (slurmgen.script.step)."""
    return (
        len(command) >= 3 and os.path.basename(command[0]).startswith("python") and list(command[1:3]) == ["-m", module]
    )


def is_accelerate(command: Sequence[str]) -> bool:
    """`python3 -m accelerate.commands.launch ...`: the rendered step of `launcher: accelerate`."""
    return is_torchrun(command, ACCELERATE_MODULE)


def accelerate_environ(job: JobContext) -> dict[str, str]:
    """What accelerate's torchrun reads from the environment: the signals it forwards (the rendered torchrun's,
    slurmgen.signal_names.elastic_signals) and, with preemption on, the lead time as its shutdown timeout."""
    from slurmgen.signal_names import elastic_signals

    out = {PET_SIGNALS: ",".join(elastic_signals(job.preempt_signal))}
    if job.preempt_signal and job.lead_seconds:
        out[PET_SHUTDOWN] = str(job.lead_seconds)
    return out


def accelerate_args(args: Sequence[str], machine_rank: int, master_addr: str, master_port: int) -> list[str]:
    """accelerate launch's arguments with this node's rank and the rendezvous first (before the program)."""
    own = [f"--machine_rank={machine_rank}", f"--main_process_ip={master_addr}", f"--main_process_port={master_port}"]
    return [*own, *args]


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


def run_accelerate(
    args: Sequence[str],
    err: Callable[[str], object],
    job: JobContext,
    pet: Mapping[str, str],
    preempt: signal.Signals | None = None,
    ready: Callable[[], None] = lambda: None,
) -> int:
    """`accelerate launch` with ``args`` (accelerate_args's) in this process; its exit code. ``pet``:
    accelerate_environ's variables, set in the environment already."""
    from accelerate.commands.launch import launch_command, launch_command_parser

    if "--multi_gpu" not in args:
        # One process in all (or a mode of accelerate's own): it starts without torchrun's PContext, so the agent
        # holds the signal from now on.
        ready()

    def launch() -> None:
        launch_command(launch_command_parser().parse_args(list(args)))

    signals = tuple(pet[PET_SIGNALS].split(","))
    timeout = pet.get(PET_SHUTDOWN, str(WORKER_SHUTDOWN_TIMEOUT))
    return run(args, err, job, preempt, ready, launch=launch, signals=signals, timeout=timeout)


def run(
    args: Sequence[str],
    err: Callable[[str], object],
    job: JobContext,
    preempt: signal.Signals | None = None,
    ready: Callable[[], None] = lambda: None,
    *,
    launch: Callable[[], object] | None = None,
    signals: Sequence[str] | None = None,
    timeout: str | None = None,
) -> int:
    """torchrun with ``args`` in this process; its exit code. ``preempt``: the preemption signal the entry point
    blocked; ``ready``: tells the batch shell that the workers hold it (called at each start of the workers).
    ``launch``: what runs torchrun (default: torchrun's own main with ``args``), with ``signals`` the ones it
    handles and ``timeout`` its shutdown timeout (default: read from ``args``)."""
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

    names = tuple(signals) if signals is not None else job.elastic_signals
    if signals is None and "--signals-to-handle" in " ".join(args):
        names = tuple(next(a.partition("=")[2] for a in args if a.startswith("--signals-to-handle=")).split(","))
    death = [getattr(signal, n.strip()) for n in names if hasattr(signal, n.strip())]
    # PContext.start looks the handler up in its module when it registers it.
    api._terminate_process_handler = once(api._terminate_process_handler, death)  # type: ignore[assignment]
    sys.argv = [TORCHRUN_MODULE if launch is None else ACCELERATE_MODULE, *args]
    try:
        if launch is None:
            torchrun.main(list(args))
        else:
            launch()
    except api.SignalException as exc:
        name = signal.Signals(exc.sigval).name
        node = job.node_name or os.uname().nodename
        err(agent_stopped_line(node, name, timeout or shutdown_timeout(args)))
        return 128 + int(exc.sigval)
    except ChildFailedError as exc:  # a worker failed: torchrun's own summary (ranks, exit codes, error files)
        err(str(exc))
        return 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
