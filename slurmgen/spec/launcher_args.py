"""`torchrun.extra_args`: each argument read as the per-node launcher reads its options, and those slurmgen writes
itself refused, naming the field.

torchrun's parser (torch/distributed/run.py, get_args_parser) is a plain argparse parser, which takes a unique
prefix of a long option (argparse, allow_abbrev, on by default) and `--opt=value`: `--nnod=3` is `--nnodes`, and
would change the node count the script's own logic relies on. accelerate launch's parser
(accelerate/commands/launch.py, launch_command_parser) sets allow_abbrev=False, so there only the whole name
counts. Both spell most options with `-` and with `_`. The option lists are those of torch 2.13 and accelerate
1.15; an option of a newer version passes through as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmgen.spec.types import Ctx


@dataclass(frozen=True)
class LauncherOptions:
    name: str
    options: frozenset[str]  # every long option, in its canonical `-` spelling, without the dashes
    abbreviations: bool  # argparse's allow_abbrev
    managed: dict[str, str]  # option -> why slurmgen refuses it, and the fix


_TORCHRUN_OPTIONS = frozenset(
    [
        "duplicate-stderr-filters",
        "duplicate-stdout-filters",
        "event-log-handler",
        "help",
        "local-addr",
        "local-ranks-filter",
        "log-dir",
        "logs-specs",
        "master-addr",
        "master-port",
        "max-restarts",
        "module",
        "monitor-interval",
        "nnodes",
        "no-python",
        "node-rank",
        "nproc-per-node",
        "numa-binding",
        "rdzv-backend",
        "rdzv-conf",
        "rdzv-endpoint",
        "rdzv-id",
        "redirects",
        "role",
        "run-path",
        "shutdown-timeout",
        "signals-to-handle",
        "standalone",
        "start-method",
        "tee",
        "virtual-local-rank",
    ]
)
_RENDEZVOUS = "slurmgen sets it from the job's rendezvous (MASTER_ADDR, MASTER_PORT, the node's index); remove it"
_RESTARTS = "the batch shell restarts the step (spec field recovery), the launcher's own restarts stay 0; remove it"
_COMMAND = "slurmgen's entry point runs the command (spec field command); remove it"
_HELP = "it prints the launcher's help and exits; remove it"


def _field(name: str) -> str:
    return f"slurmgen sets it itself; use the spec field {name} instead"


TORCHRUN = LauncherOptions(
    "torchrun",
    _TORCHRUN_OPTIONS,
    True,
    {
        "nnodes": _field("nodes"),
        "nproc-per-node": _field("nproc_per_node"),
        "node-rank": _RENDEZVOUS,
        "master-addr": _RENDEZVOUS,
        "master-port": _RENDEZVOUS,
        "rdzv-backend": _RENDEZVOUS,
        "rdzv-endpoint": _RENDEZVOUS,
        "rdzv-id": _RENDEZVOUS,
        "rdzv-conf": _RENDEZVOUS,
        "standalone": _RENDEZVOUS,
        "max-restarts": _RESTARTS,
        "signals-to-handle": _field("preemption.signal"),
        "shutdown-timeout": _field("preemption.lead_time"),
        "no-python": _COMMAND,
        "module": _COMMAND,
        "run-path": _COMMAND,
        "help": _HELP,
    },
)
_ACCELERATE_OPTIONS = frozenset(
    [
        "config-file",
        "cpu",
        "debug",
        "downcast-bf16",
        "dynamo-backend",
        "dynamo-mode",
        "dynamo-use-dynamic",
        "dynamo-use-fullgraph",
        "env",
        "gpu-ids",
        "gradient-accumulation-steps",
        "gradient-clipping",
        "help",
        "log-dir",
        "machine-rank",
        "main-process-ip",
        "main-process-port",
        "main-training-function",
        "max-restarts",
        "mixed-precision",
        "module",
        "monitor-interval",
        "mpirun-hostfile",
        "multi-gpu",
        "no-python",
        "num-cpu-threads-per-process",
        "num-machines",
        "num-processes",
        "quiet",
        "rdzv-backend",
        "rdzv-conf",
        "role",
        "same-network",
        "tee",
        "tpu",
        "use-deepspeed",
        "use-fsdp",
        "use-megatron-lm",
    ]
)
ACCELERATE = LauncherOptions(
    "accelerate launch",
    _ACCELERATE_OPTIONS,
    False,
    {
        "num-machines": _field("nodes"),
        "num-processes": _field("nodes and nproc_per_node"),
        "machine-rank": _RENDEZVOUS,
        "main-process-ip": _RENDEZVOUS,
        "main-process-port": _RENDEZVOUS,
        "same-network": _RENDEZVOUS,
        "rdzv-backend": _RENDEZVOUS,
        "rdzv-conf": _RENDEZVOUS,
        "multi-gpu": "slurmgen writes it for more than one process (spec fields nodes, nproc_per_node); remove it",
        "cpu": "a job without GPUs (gpus_per_node: 0) runs on the CPU already; remove it",
        "mpirun-hostfile": "srun starts one launcher per node, not mpirun; remove it",
        "max-restarts": _RESTARTS,
        "no-python": _COMMAND,
        "module": _COMMAND,
        "help": _HELP,
    },
)
# accelerate launch refuses --multi_gpu with any of these (accelerate/commands/launch.py, _validate_launch_command):
# they pick their own way to start the workers, torchrun's included.
ACCELERATE_MODES = frozenset({"use-deepspeed", "use-fsdp", "use-megatron-lm", "tpu"})
# The short options each parser knows, as their long names.
_SHORT = {"torchrun": {"m": "module", "r": "redirects", "t": "tee", "h": "help"},
          "accelerate launch": {"m": "module", "q": "quiet", "t": "tee", "h": "help"}}  # fmt: skip


def launcher_options(launcher: str) -> LauncherOptions:
    return ACCELERATE if launcher == "accelerate" else TORCHRUN


def option_of(arg: str, table: LauncherOptions) -> tuple[str | None, str | None]:
    """The long option ``arg`` names as the launcher reads it (canonical spelling), else None; and a problem (an
    ambiguous prefix), else None. An argument that is no option (a value) names none."""
    if arg.startswith("--") and len(arg) > 2:
        name = arg[2:].partition("=")[0].replace("_", "-")
        if name in table.options:
            return name, None
        if not table.abbreviations:
            return None, None
        matches = sorted(o for o in table.options if o.startswith(name))
        if len(matches) > 1:
            return None, (
                f"{arg!r} is the start of several {table.name} options ({', '.join('--' + m for m in matches)}), "
                "which it refuses as ambiguous; write the whole name"
            )
        return (matches[0] if matches else None), None
    if arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit():
        return _SHORT[table.name].get(arg[1]), None
    return None, None


def check_extra_args(args: list[str], launcher: str, ctx: Ctx) -> None:
    """One error per argument that names an option slurmgen writes itself, or an ambiguous prefix."""
    table = launcher_options(launcher)
    for i, arg in enumerate(args):
        path = ("torchrun", "extra_args", i)
        option, problem = option_of(arg, table)
        if problem is not None:
            ctx.fail(path, problem)
        elif option in table.managed:
            written = arg.lstrip("-").partition("=")[0].replace("_", "-")
            shown = repr(arg) if written == option else f"{arg!r} ({table.name} reads it as --{option})"
            ctx.fail(path, f"{shown}: {table.managed[option]}")


def accelerate_mode(args: list[str] | tuple[str, ...]) -> bool:
    """Whether ``args`` pick accelerate launch's own way to start the workers (deepspeed, fsdp, ...)."""
    return any(option_of(arg, ACCELERATE)[0] in ACCELERATE_MODES for arg in args)
