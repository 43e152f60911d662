"""The escape hatches `sbatch:` (extra #SBATCH directives) and `srun:` (extra options of the training step).

Each key is read as the command reads it (spec/slurm_options.py): a one-letter key is the short option and is
written as its long form (`p` is `--partition`), an abbreviation is refused naming the option it stands for, and
an option slurmgen writes itself is refused naming the spec field that sets it, since a second value would
silently change what the script's own logic relies on.
"""

from __future__ import annotations

from typing import Any

from slurmgen.signal_names import parse_sbatch_signal
from slurmgen.spec.slurm_options import SBATCH, SRUN, Command, read_option
from slurmgen.spec.types import Ctx

# Options slurmgen writes on its #SBATCH lines, and the spec field that sets each.
MANAGED = {
    "job-name": "name",
    "nodes": "nodes",
    "ntasks-per-node": "tasks_per_node",
    "tasks-per-node": "tasks_per_node",
    "ntasks": "nodes/tasks_per_node",
    "gpus-per-node": "gpus_per_node",
    "gpus": "gpus_per_node",
    "cpus-per-task": "cpus_per_task",
    "mem": "mem",
    "time": "time",
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "constraint": "constraint",
    "array": "array",
    "dependency": "dependency",
    "chdir": "chdir",
    "output": "output",
    "error": "error",
    "open-mode": "(always append)",
    "signal": "preemption.signal / preemption.lead_time",  # allowed when preemption is off (check_sbatch)
    "export": "env (values in --export are split on commas and leak into accounting)",
}

# Options slurmgen writes on the step line (script/step.py), and the spec field that sets each. The pyxis
# options (`container-image`, ...) belong to the spec field container as a whole.
SRUN_MANAGED = {
    "nodes": "nodes",
    "ntasks-per-node": "tasks_per_node",
    "tasks-per-node": "tasks_per_node",
    "ntasks": "nodes/tasks_per_node",
    "cpus-per-task": "cpus_per_task",
    "gpus-per-node": "gpus_per_node",
    "gpus": "gpus_per_node",
    "gres": "gpus_per_node",
    "nodelist": "recovery (the step runs on the nodes that passed their checks)",
    "output": "output (one log per node, which slurmgen reads back)",
    "error": "output (the step's stderr goes into its per-node logs, which slurmgen reads back)",
    "open-mode": "(always append)",
    "export": "env",
    "chdir": "chdir",
    "multi-prog": "command",
    "signal": "preemption.signal",
    "container": "container",
}
_PYXIS_PREFIXES = ("container-", "no-container-")
# sbatch(1)'s ways to ask for GPUs besides --gpus-per-node, which slurmgen writes from gpus_per_node: a second
# request is refused, since Slurm would take both (a job asking for 8 GPUs per node and 1 per task).
GPU_OPTIONS = ("gpus", "gpus-per-node", "gpus-per-task", "gpus-per-socket")


def asks_for_gpus(option: str, value: Any) -> bool:
    """Whether an sbatch option asks for GPUs: one of GPU_OPTIONS, or --gres naming the gpu resource (sbatch(1)
    --gres: a comma-separated list of name[[:type]:count], e.g. gpu:a100:2)."""
    if option in GPU_OPTIONS:
        return True
    if option != "gres" or isinstance(value, bool):
        return False
    return any(part.strip().split(":", 1)[0] == "gpu" for part in str(value).split(","))


KILL_ON_BAD_EXIT = "kill-on-bad-exit"


def _option_names(section: str, given: dict[str, Any], command: Command, ctx: Ctx) -> dict[str, tuple[str, Any]]:
    """Each given key's full option name (and its value), keyed by the key as written; a key that cannot be
    written as it is has failed already."""
    out: dict[str, tuple[str, Any]] = {}
    for key, value in given.items():
        read = read_option(key, command)
        if read.problem is not None:
            ctx.fail((section, key), read.problem)
            continue
        out[key] = (read.option, value)
    return out


def _as_read(key: str, option: str, command: Command) -> str:
    """How a message names a key that the command reads as another name: `p` (sbatch's -p, --partition)."""
    if option == key:
        return f"--{option}"
    if len(key) == 1:
        return f"{key} (-{key}, --{option})"
    return f"{key} ({command.name} reads it as --{option})"


def _abbreviation(key: str, option: str, command: Command) -> str:
    return (
        f"{command.name} reads {key} as --{option} (getopt_long takes any prefix that starts only one option's "
        f"name); write the full name, {option}, so that a later option starting the same way cannot change it"
    )


def check_sbatch(sbatch: dict[str, Any], preemption: bool, ctx: Ctx, gpus: int = 0) -> dict[str, str | None]:
    """`sbatch:` as directives: option -> value (None: a flag); problems recorded on `ctx`. ``gpus``: the spec's
    gpus_per_node, which a GPU option here would ask for a second time."""
    out: dict[str, str | None] = {}
    for key, (option, value) in _option_names("sbatch", sbatch, SBATCH, ctx).items():
        path = ("sbatch", key)
        shown = _as_read(key, option, SBATCH)
        if gpus > 0 and asks_for_gpus(option, value):
            ctx.fail(
                path,
                f"asks for GPUs a second time: gpus_per_node: {gpus} already asks for them (slurmgen writes "
                f"--gpus-per-node={gpus}); keep one of the two, gpus_per_node or sbatch.{key}",
            )
            continue
        if option == "gres" and asks_for_gpus(option, value):
            ctx.fail(path, "asks for GPUs, which slurmgen writes itself; use the spec field gpus_per_node instead")
            continue
        if option == "signal" and not preemption:
            # With slurmgen's preemption off the signal is the user's own: checked, then trapped and forwarded
            # by the batch shell when it is sent there (B:).
            parsed = parse_sbatch_signal(str(value)) if not isinstance(value, bool) else "give a value, e.g. B:USR1@120"
            if isinstance(parsed, str):
                ctx.fail(path, parsed)
                continue
        elif option == "signal":
            ctx.fail(
                path,
                f"slurmgen writes {shown} itself while its preemption handling is on; use preemption.signal and "
                "preemption.lead_time, or set preemption: false to send a signal of your own",
            )
            continue
        elif option in ("requeue", "no-requeue") and preemption:
            # The preemption handling requeues the job itself (scontrol requeue), which needs --requeue; with it
            # off slurmgen writes neither, and whether Slurm may requeue the job is the user's to say.
            fix = "remove it" if option == "requeue" else "set preemption: false for a job that is never requeued"
            ctx.fail(path, f"slurmgen writes --requeue itself while its preemption handling is on; {fix}")
            continue
        elif option in MANAGED:
            ctx.fail(path, f"slurmgen writes {shown} itself; use the spec field {MANAGED[option]} instead")
            continue
        elif option != key and len(key) > 1:
            ctx.fail(path, _abbreviation(key, option, SBATCH))
            continue
        if value is not False:
            out[option] = None if value is True else value
    return out


def check_srun(srun: dict[str, Any], ctx: Ctx) -> dict[str, str | None]:
    """`srun:` as options of the step line: option -> value (None: a flag); `kill-on-bad-exit` is always "0" or
    "1" when given; problems recorded on `ctx`."""
    out: dict[str, str | None] = {}
    for key, (option, value) in _option_names("srun", srun, SRUN, ctx).items():
        path = ("srun", key)
        shown = _as_read(key, option, SRUN)
        if option in SRUN_MANAGED or option.startswith(_PYXIS_PREFIXES):
            field = SRUN_MANAGED.get(option, "container")
            ctx.fail(path, f"slurmgen writes {shown} itself on the step line; use the spec field {field} instead")
            continue
        if option != key and len(key) > 1:
            ctx.fail(path, _abbreviation(key, option, SRUN))
            continue
        if option == KILL_ON_BAD_EXIT:
            # srun(1) -K, --kill-on-bad-exit[=0|1]; slurmgen writes 1 unless told 0.
            flag = {False: "0", True: "1", "0": "0", "1": "1"}.get(value)
            if flag is None:
                ctx.fail(path, f"{value!r} is not 0 or 1; write {key}: false to let the other tasks run on")
                continue
            out[option] = flag
        elif value is not False:
            out[option] = None if value is True else value
    return out
