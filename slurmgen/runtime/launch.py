"""The entry point the rendered script runs in every task.

    python3 -m slurmgen.runtime.launch [--torchrun-agent] -- CMD ARGS...
    python3 -m slurmgen.runtime.launch --rendezvous

Without ``--rendezvous`` it sets the variables an unmodified ``env://`` program needs (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE from SLURM's when torchrun's are absent; MASTER_ADDR and MASTER_PORT; the socket
interface for NCCL and Gloo; TORCH_NCCL_ASYNC_ERROR_HANDLING), never overriding what is already set, blocks
the preemption signal, and ``exec``s the command: the program replaces this process, so Slurm's signals reach
it directly (bash(1), SIGNALS: a shell defers its traps while a foreground child runs; an exec'd program
has no shell in between).

``--torchrun-agent``: this task is torchrun's per-node launcher. torchrun sets the rank variables for its
workers itself, so none are set here. The preemption signal is blocked here too: Slurm delivers it to every
process of the step, workers included, so torchrun need not forward it, and must not die of it while starting.

``--rendezvous`` prints ``MASTER_ADDR MASTER_PORT`` on one line for the batch shell:
``read -r MASTER_ADDR MASTER_PORT < <(python3 -m slurmgen.runtime.launch --rendezvous)``.

Any startup problem is one ``slurmgen: ...`` line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, MutableMapping, Sequence

from slurmgen.errors import EXIT_INVALID, SlurmgenError, UsageError

USAGE = (
    "usage: python3 -m slurmgen.runtime.launch [--torchrun-agent] -- CMD [ARGS...]\n"
    "       python3 -m slurmgen.runtime.launch --rendezvous"
)
_FLAGS = ("--rendezvous", "--torchrun-agent")
EXIT_CANNOT_EXECUTE = 126  # the shell's codes for "found but not executable" and "not found"
EXIT_NOT_FOUND = 127


def parse_args(argv: Sequence[str]) -> tuple[set[str], list[str]]:
    """Flags before ``--`` (or before the first non-flag word), then the command."""
    args = list(argv)
    flags: set[str] = set()
    while args and args[0].startswith("--") and args[0] != "--":
        flag = args.pop(0)
        if flag in ("--help", "-h"):
            raise UsageError(USAGE)
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
    return flags, args


def run(
    argv: Sequence[str],
    environ: MutableMapping[str, str],
    *,
    execvp: Callable[[str, list[str]], object] = os.execvp,
    out: Callable[[str], object] = print,
    err: Callable[[str], object] = lambda line: print(line, file=sys.stderr),
) -> int:
    """The entry point with its effects passed in. Returns the exit code (``execvp`` does not return)."""
    from slurmgen.runtime.signal_block import block_preemption_signal

    flags, command = parse_args(argv)
    if "--rendezvous" not in flags:
        # First, before anything slow: blocked, a signal that arrives before the program's handler exists stays
        # pending across exec instead of killing the task (signals.py). The torchrun agent blocks it too: Slurm
        # signals every process of the step (proctrack), so the workers receive it directly from slurmstepd,
        # and an agent still importing torch would otherwise die of it.
        block_preemption_signal(environ)
    from slurmgen.runtime.prepare import Host, prepare, resolve_master

    if "--rendezvous" in flags:
        master, _, port = resolve_master(environ, Host())
        out(f"{master.host} {port.port}")
        return 0
    agent = "--torchrun-agent" in flags
    prepared = prepare(environ, agent=agent)
    for warning in prepared.warnings:
        err(f"slurmgen: warning: {warning}")
    environ.update(prepared.updates)
    try:
        execvp(command[0], command)
    except FileNotFoundError:
        err(f"slurmgen: cannot run {command[0]!r}: command not found")
        return EXIT_NOT_FOUND
    except OSError as error:
        err(f"slurmgen: cannot run {command[0]!r}: {error.strerror or error}")
        return EXIT_CANNOT_EXECUTE
    return 0


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
