"""The entry point the rendered script runs in every task.

    python3 -m slurmgen.task [--torchrun-agent] [--expand=I,J] [--expand-env=NAME=VALUE]... -- CMD ARGS...
    python3 -m slurmgen.task --rendezvous

Without ``--rendezvous`` it sets the variables an unmodified ``env://`` program needs (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE from SLURM's when torchrun's are absent; MASTER_ADDR and MASTER_PORT; the socket
interface for NCCL and Gloo; TORCH_NCCL_ASYNC_ERROR_HANDLING), never overriding what is already set, and starts the
command as the child of a thin supervisor (slurmgen.task.supervisor): it delivers the preemption signal as
``preemption.handler`` says, passes on the signals a parent sent it, writes the program's output to the rank's own
log, and records a failure of the program's own for the batch shell. The supervisor blocks the signals it handles
first, before anything slow: a signal sent during start-up waits instead of killing the task.

``--torchrun-agent``: this task is torchrun's (or `accelerate launch`'s) per-node launcher, with the preemption
signal blocked (Slurm delivers it to every process of the step, workers included, so torchrun need not forward it,
and must not die of it while starting). ``python -m torch.distributed.run`` and ``python -m
accelerate.commands.launch`` run in this process (slurmgen.task.torchrun_agent: one shutdown and one line when the
job ends); any other command is ``exec``'d. torchrun sets the rank variables for its workers
itself, so none are set here; each worker runs this entry point again and gets its own supervisor.

``--expand=I,J`` and ``--expand-env=NAME=VALUE``: the command's words I and J, and the variable NAME, hold a
``${NAME}`` that differs per task (``${SLURM_PROCID}``, ``${RANK}``: slurmgen/variables.py); this task expands them
from its own environment, once its ranks are set, just before the program starts.

``--rendezvous`` prints ``MASTER_ADDR MASTER_PORT`` on one line for the batch shell:
``read -r MASTER_ADDR MASTER_PORT < <(python3 -m slurmgen.task --rendezvous)``.

Any startup problem is one ``slurmgen: ...`` line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import replace

from slurmgen import contract
from slurmgen.errors import SlurmgenError, UsageError
from slurmgen.exit_codes import EXIT_CANNOT_EXECUTE, EXIT_INVALID, EXIT_NOT_FOUND
from slurmgen.job_context.context import JobContext

# Not `typing`'s: its import is about 2 ms of every task's start (bench/startup.py), and nothing on the way to the
# program needs it. mypy treats a module-level TYPE_CHECKING = False like typing's.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurmgen.task.supervisor import TaskSetup

USAGE = (
    "usage: python3 -m slurmgen.task [--torchrun-agent] [--expand=I,J] [--expand-env=NAME=VALUE]... -- CMD [ARGS...]"
    "\n       python3 -m slurmgen.task --rendezvous"
)
_FLAGS = ("--rendezvous", "--torchrun-agent")
_EXPAND, _EXPAND_ENV = "--expand=", "--expand-env="


def parse_args(argv: Sequence[str]) -> tuple[set[str], list[str]]:
    """Flags before ``--`` (or before the first non-flag word), then the command."""
    flags, _, command = parse_all(argv)
    return flags, command


def parse_all(argv: Sequence[str]) -> tuple[set[str], list[str], list[str]]:
    """The flags, the `--expand`/`--expand-env` ones in order, and the command."""
    args = list(argv)
    flags: set[str] = set()
    expansions: list[str] = []
    while args and args[0].startswith("--") and args[0] != "--":
        flag = args.pop(0)
        if flag in ("--help", "-h"):
            raise UsageError(USAGE)
        if flag.startswith((_EXPAND, _EXPAND_ENV)):
            expansions.append(flag)
            continue
        if flag not in _FLAGS:
            raise UsageError(f"unknown option {flag!r}\n{USAGE}")
        flags.add(flag)
    if args and args[0] == "--":
        args.pop(0)
    if "--rendezvous" in flags:
        if args or len(flags) > 1:
            raise UsageError(f"--rendezvous takes no command and no other option\n{USAGE}")
    elif not args:
        raise UsageError(f"no command to run\n{USAGE}")
    return flags, expansions, args


def expand_per_task(expansions: Sequence[str], command: list[str], environ: MutableMapping[str, str]) -> list[str]:
    """The command with its per-task words expanded, and ``environ`` with its per-task variables set, from this
    task's environment (its ranks already set): every value read from the environment before any is set."""
    from slurmgen import variables

    words = list(command)
    setting: dict[str, str] = {}
    try:
        for flag in expansions:
            if flag.startswith(_EXPAND_ENV):
                name, sep, template = flag[len(_EXPAND_ENV) :].partition("=")
                if not sep or not name:
                    raise UsageError(f"{flag!r}: write --expand-env=NAME=VALUE")
                setting[name] = template
                continue
            for index in flag[len(_EXPAND) :].split(","):
                if not index.isdigit() or int(index) >= len(words):
                    raise UsageError(f"{flag!r}: the command has words 0 to {len(words) - 1}")
                words[int(index)] = variables.expand(words[int(index)], environ)
        environ.update(variables.expand_all(setting, environ))
    except variables.VariableError as error:
        raise UsageError(str(error)) from None
    return words


def run(
    argv: Sequence[str],
    environ: MutableMapping[str, str],
    *,
    execvp: Callable[[str, list[str]], object] = os.execvp,
    supervise: Callable[[TaskSetup], int] | None = None,
    out: Callable[[str], object] = print,
    err: Callable[[str], object] = lambda line: print(line, file=sys.stderr),
) -> int:
    """The entry point with its effects passed in. Returns the exit code (``execvp`` does not return)."""
    from slurmgen.task.signal_block import block_preemption_signal, block_supervised

    flags, expansions, command = parse_all(argv)
    agent = "--torchrun-agent" in flags
    if agent:  # only torchrun's launcher task needs it
        from slurmgen.task import torchrun_agent
    torchrun = agent and torchrun_agent.is_torchrun(command)  # the agent runs here, and says ready itself
    accelerate = agent and torchrun_agent.is_accelerate(command)  # accelerate's torchrun: here too
    preempt = None
    job = JobContext.from_environ(environ)  # this task's one read of its environment; passed down from here
    if "--rendezvous" not in flags:
        # First, before anything slow: until the program has a handler, a signal's default action would end the
        # task. Blocked, it waits (signal(7)).
        preempt = block_preemption_signal(job) if agent else block_supervised(job)
        # The process that signals every process of the step (slurmstepd, or the local fake srun) is the parent
        # of the outermost entry point; torchrun's workers learn it from their agent's.
        job = replace(job, step_pid=job.step_pid or str(os.getppid()))
        environ.setdefault(contract.STEP_PID, str(job.step_pid))
        if preempt is not None and not (torchrun or accelerate):
            say_ready(job)  # torchrun's agent says it once its workers exist (slurmgen.task.torchrun_agent)
    from slurmgen.task.prepare import Host, prepare, resolve_master

    if "--rendezvous" in flags:
        master, _, port = resolve_master(job, Host())
        out(f"{master.host} {port.port}")
        return 0
    prepared = prepare(job, agent=agent)
    for warning in prepared.warnings:
        err(f"slurmgen: warning: {warning}")
    environ.update(prepared.updates)
    if expansions:
        command = expand_per_task(expansions, command, environ)
    if job.checkpoint:  # the program's own checkpoint: resume.args on a start that resumes (task/resume_flag.py)
        from slurmgen.task import resume_flag

        command, line = resume_flag.apply(job, command, environ)
        if line is not None:
            err(f"slurmgen: {line}")
        # whether this start resumed (apply sets it in the environment for torchrun's workers), read as the
        # context reads every variable, for the supervisor's checkpoint watch
        job = replace(job, resumed=JobContext.from_environ(environ).resumed)
    if not agent:
        from slurmgen.task import supervisor

        plan = supervisor.task_setup(command, environ, prepared.ranks.rank, preempt, job)
        if supervise is not None:
            return supervise(plan)

        def say(line: str) -> None:
            err(f"slurmgen: {line}")

        return supervisor.supervise(plan, say)
    if accelerate:
        # As torchrun, below; this node's rank (its task's index: one task per node) and the rendezvous from here.
        pet = torchrun_agent.accelerate_environ(job)
        environ.update(pet)  # read by accelerate's torchrun in this process
        args = torchrun_agent.accelerate_args(
            command[3:], prepared.ranks.rank, prepared.master.host, prepared.port.port
        )
        return torchrun_agent.run_accelerate(args, err, job, pet, preempt, lambda: say_ready(job))
    if torchrun:
        # In this process: one line, not tracebacks, when the job ends; and an early preemption signal kept for the
        # workers.
        return torchrun_agent.run(command[3:], err, job, preempt, lambda: say_ready(job))
    try:
        execvp(command[0], command)
    except FileNotFoundError:
        err(f"slurmgen: cannot run {command[0]!r}: command not found")
        return EXIT_NOT_FOUND
    except OSError as error:
        err(f"slurmgen: cannot run {command[0]!r}: {error.strerror or error}")
        return EXIT_CANNOT_EXECUTE
    return 0


def say_ready(job: JobContext) -> None:
    """Tell the batch shell this task holds the preemption signal now (blocked, so no longer fatal): an empty file
    per task in the run's ready directory. The shell holds an early signal until every task's file is there (or
    for at most a part of the lead time), however slowly the interpreter started (a cold venv on NFS). A task
    that cannot write it still runs: the shell then holds to its limit."""
    log_dir, task = job.log_dir, job.task_id
    if not log_dir or not task.isdigit():
        return
    ready = os.path.join(log_dir, f"{contract.READY_DIR}{job.run}")
    try:
        os.makedirs(ready, exist_ok=True)
        os.close(os.open(os.path.join(ready, task), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv, os.environ)
    except UsageError as error:
        print(str(error) if str(error).startswith("usage:") else f"slurmgen: {error}", file=sys.stderr)
        return EXIT_INVALID
    except SlurmgenError as error:
        print(f"slurmgen: {error}", file=sys.stderr)
        return error.exit_code
    except Exception as error:  # a bug in slurmgen, but a task must still fail with one readable line
        print(f"slurmgen: internal error ({type(error).__name__}): {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
