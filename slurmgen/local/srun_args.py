"""srun's command line as the rendered script writes it, and the step it describes. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurmgen.local import jobenv

_VALUED = {
    "-N": "nodes",
    "--nodes": "nodes",
    "--ntasks-per-node": "tasks_per_node",
    "-c": "cpus_per_task",
    "--cpus-per-task": "cpus_per_task",
    "-o": "output",
    "--output": "output",
    "--open-mode": "open_mode",
    "-K": "kill_on_bad_exit",
    "--kill-on-bad-exit": "kill_on_bad_exit",
    "-n": "ntasks",
    "--ntasks": "ntasks",
    "-w": "nodelist",
    "--nodelist": "nodelist",
    "--gpus-per-node": "gpus_per_node",  # the node check's step: each emulated node has its GPUs already
}
_CONTAINER_VALUED = {
    "--container-image",
    "--container-mounts",
    "--container-workdir",
    "--container-name",
    "--container-save",
    "--container-env",
}


# Options of the spec's `srun:` that say how a step is placed, bound or wired on a real cluster (srun(1): CPU and
# memory binding, task distribution, MPI plugin, labels, the wait after the first task ends): on one machine they
# change nothing a test of the job could see, so the emulation accepts them and says it ignores them.
_PLACEMENT = {
    "--mpi",
    "--distribution",
    "--cpu-bind",
    "--mem-bind",
    "--hint",
    "--overcommit",
    "--label",
    "--unbuffered",
    "--wait",
    "--cpu-freq",
    "--network",
    "--accel-bind",
}


class SrunError(Exception):
    """A command line this emulation cannot run; srun's own wording where there is one."""


@dataclass(frozen=True)
class SrunArgs:
    command: tuple[str, ...]
    nodes: int | None = None
    tasks_per_node: int | None = None
    cpus_per_task: int | None = None
    output: str | None = None
    open_mode: str = "truncate"
    kill_on_bad_exit: bool = False
    # --mpi=pmix or pmi2: Slurm's PMI server ends the step when a task fails or aborts, whatever
    # --kill-on-bad-exit says (src/plugins/mpi/pmix/pmixp_client.c `_errhandler`)
    mpi_abort: bool = False
    nodelist: str = ""
    ntasks: int | None = None
    ignored: tuple[str, ...] = field(default=())  # container options, for the warning
    unplaced: tuple[str, ...] = field(default=())  # placement options (_PLACEMENT), for the warning


_MPI_ABORT = re.compile(r"--mpi=(pmix\S*|pmi2)$")


def _positive(option: str, value: str) -> int:
    if not (value.isdigit() and int(value) > 0):
        raise SrunError(f"{option}: want a positive number, not {value!r}")
    return int(value)


def parse_args(argv: Sequence[str]) -> SrunArgs:
    """srun's options as the rendered script writes them (both `--opt=value` and `--opt value`)."""
    values: dict[str, str] = {}
    ignored: list[str] = []
    unplaced: list[str] = []
    args = list(argv)
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg == "--":
            break
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        is_container = name.startswith(("--container-", "--no-container-"))
        if name in _VALUED or name in _CONTAINER_VALUED:
            flag_ok = name in ("-K", "--kill-on-bad-exit")
            if eq or inline:
                value = inline
            elif flag_ok:
                value = "1"
            elif args:
                value = args.pop(0)
            else:
                raise SrunError(f"option {name} needs a value")
            if is_container:
                ignored.append(f"{name}={value}")
            else:
                values[_VALUED[name]] = value
        elif is_container and not eq:
            ignored.append(name)  # pyxis flags: --container-writable, --no-container-mount-home, ...
        elif name in _PLACEMENT:  # the script writes the spec's srun: options as --name or --name=value
            unplaced.append(arg)
        else:
            raise SrunError(f"option {arg!r} is not emulated by `slurmgen run` (only what slurmgen renders)")
    if not args:
        raise SrunError("no command to run")
    mode = values.get("open_mode", "truncate")
    if mode not in ("append", "truncate"):
        raise SrunError(f"--open-mode={mode}: want append or truncate")
    kill = values.get("kill_on_bad_exit", "0")
    if kill not in ("0", "1"):
        raise SrunError(f"--kill-on-bad-exit={kill}: want 0 or 1")
    return SrunArgs(
        command=tuple(args),
        nodes=_positive("--nodes", values["nodes"]) if "nodes" in values else None,
        tasks_per_node=_positive("--ntasks-per-node", values["tasks_per_node"]) if "tasks_per_node" in values else None,
        cpus_per_task=_positive("--cpus-per-task", values["cpus_per_task"]) if "cpus_per_task" in values else None,
        output=values.get("output"),
        open_mode=mode,
        kill_on_bad_exit=kill == "1",
        mpi_abort=any(_MPI_ABORT.match(word) for word in unplaced),
        nodelist=values.get("nodelist", ""),
        ntasks=_positive("--ntasks", values["ntasks"]) if "ntasks" in values else None,
        ignored=tuple(ignored),
        unplaced=tuple(unplaced),
    )


def step_shape(args: SrunArgs, env: Mapping[str, str], step_id: int) -> jobenv.StepShape:
    """The step's nodes and tasks from the options and the job's environment (srun inside an allocation)."""
    from slurmgen.slurm.hostlist import expand_hostlist

    job_id = env.get("SLURM_JOB_ID", "")
    job_list = env.get("SLURM_JOB_NODELIST", "")
    if not job_id or not job_list:
        raise SrunError("not inside a job (SLURM_JOB_ID / SLURM_JOB_NODELIST unset); use `slurmgen run`")
    hosts = expand_hostlist(job_list)
    nodes = args.nodes or (len(expand_hostlist(args.nodelist)) if args.nodelist else len(hosts))
    if nodes > len(hosts):
        raise SrunError(f"Unable to create step for job {job_id}: the job has {len(hosts)} nodes, asked for {nodes}")
    per_node = args.tasks_per_node or int(env.get("SLURM_NTASKS_PER_NODE") or 1)
    chosen = hosts[:nodes]
    if args.nodelist:
        # srun(1) --nodelist: these nodes of the allocation (with --nodes, exactly as many).
        chosen = expand_hostlist(args.nodelist)
        if any(h not in hosts for h in chosen) or len(chosen) != nodes:
            raise SrunError(f"Unable to create step for job {job_id}: --nodelist={args.nodelist} is not {nodes} "
                            f"node(s) of the job's {job_list}")  # fmt: skip
    # srun(1): --ntasks defaults to SLURM_NTASKS, the allocation's; a step on fewer nodes must say its own.
    ntasks = args.ntasks or int(env.get("SLURM_NTASKS") or 0)
    if ntasks > nodes * per_node:
        raise SrunError(f"Unable to create step for job {job_id}: More processors requested than permitted")
    gpus = jobenv.parse_gpus(env.get(jobenv.LOCAL_GPUS, ""))
    if gpus is not None:
        gpus = tuple(gpus[hosts.index(h)] for h in chosen if hosts.index(h) < len(gpus))
    return jobenv.StepShape(
        job_id=job_id,
        step_id=step_id,
        hosts=tuple(chosen),
        tasks_per_node=per_node,
        cpus_per_task=args.cpus_per_task,
        hostlist=job_list if chosen == hosts else "",
        gpus=gpus,
    )
