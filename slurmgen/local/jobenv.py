"""What Slurm gives a batch script and its tasks, for a job emulated on this machine. Pure functions.

Emulated nodes are the loopback addresses 127.0.0.1, 127.0.0.2, ...: IP literals resolve without DNS or
/etc/hosts, Linux routes all of 127.0.0.0/8 to `lo` without any set-up or root, and they make a valid Slurm
hostlist (`127.0.0.[1-2]`) that expand_hostlist and the runtime's rendezvous (first node = master) accept.
Names from /etc/hosts (a `localhost` alias per node) would need root; network namespaces would too.

Variable names and forms follow sbatch(1) and srun(1) "OUTPUT ENVIRONMENT VARIABLES"; like Slurm up to 25.11,
SLURM_RESTART_COUNT is left unset on the first run, as Slurm's src/common/env.c does up to 25.11.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmgen.slurm.client import clean_submit_env

CLUSTER_NAME = "local"
PARTITION = "local"
MAX_NODES = 254  # 127.0.0.1 .. 127.0.0.254: one octet keeps the hostlist a single bracket group
# Private variables between the runner and the fakes (never read by the runtime).
LOCAL_DIR = "SLURMGEN_LOCAL_DIR"  # the job's control directory: requeue requests, step counter
LOCAL_GPUS = "SLURMGEN_LOCAL_GPUS"  # GPUs of each emulated node, "0,1;2,3": node i gets group i
BAD_NODE = "SLURMGEN_LOCAL_BAD_NODE"  # `slurmgen run --bad-node N`: the node whose checks the fake srun fails
KILL_WAIT = "SLURMGEN_LOCAL_KILL_WAIT"  # seconds between TERM and KILL (Slurm's KillWait)
DEFAULT_KILL_WAIT = 10.0  # Slurm's default KillWait is 30 s; a laptop needs less, and the runtime saves first

# Inherited from an enclosing allocation, these would steer the emulated job (clean_submit_env's list).


def node_names(count: int) -> list[str]:
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"a local job has 1 to {MAX_NODES} emulated nodes, not {count}")
    return [f"127.0.0.{i}" for i in range(1, count + 1)]


def nodelist(count: int) -> str:
    """The node list as a Slurm hostlist: `127.0.0.1`, `127.0.0.[1-2]`."""
    node_names(count)  # range check
    return "127.0.0.1" if count == 1 else f"127.0.0.[1-{count}]"


def tasks_per_node_text(counts: Sequence[int]) -> str:
    """Slurm's compressed form: [2, 2, 2, 1] -> `2(x3),1`."""
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        parts.append(str(counts[i]) if j - i == 1 else f"{counts[i]}(x{j - i})")
        i = j
    return ",".join(parts)


@dataclass(frozen=True)
class JobShape:
    """One emulated job run: who it is, where it runs, and how big it is."""

    job_id: str
    name: str
    nodes: int
    tasks_per_node: int
    cpus_per_task: int | None
    submit_dir: str
    submit_host: str
    restart_count: int = 0
    gpus: tuple[tuple[str, ...], ...] | None = None  # per node; None: no GPUs (CPU run)
    excluded: tuple[str, ...] = ()  # the job's ExcNodeList (scontrol update): this run gets the next free nodes

    def hosts(self) -> list[str]:
        """This run's nodes: the first `nodes` emulated nodes not excluded, as Slurm would place it elsewhere."""
        if not self.excluded:
            return node_names(self.nodes)
        free = [n for n in node_names(MAX_NODES) if n not in self.excluded]
        if len(free) < self.nodes:
            raise ValueError(f"a local job has at most {MAX_NODES} emulated nodes, {len(self.excluded)} excluded")
        return free[: self.nodes]

    def hostlist(self) -> str:
        return nodelist(self.nodes) if not self.excluded else ",".join(self.hosts())


def batch_env(shape: JobShape, base: Mapping[str, str], control_dir: str, path_prefix: Sequence[str]) -> dict[str, str]:
    """The batch shell's environment: `base` (as sbatch --export=ALL) without inherited Slurm variables, plus
    what slurmd sets for the batch step, plus the fakes' private variables and their directory first on PATH."""
    env = clean_submit_env(base)  # what sbatch would pass on; the local job talks to no real cluster:
    env.pop("SLURM_CONF", None)
    names = shape.hosts()
    ntasks = str(shape.nodes * shape.tasks_per_node)
    env.update(
        {
            "SLURM_JOB_ID": shape.job_id,
            "SLURM_JOBID": shape.job_id,
            "SLURM_JOB_NAME": shape.name,
            "SLURM_JOB_NODELIST": shape.hostlist(),
            "SLURM_NODELIST": shape.hostlist(),
            "SLURM_JOB_NUM_NODES": str(shape.nodes),
            "SLURM_NNODES": str(shape.nodes),
            "SLURM_NTASKS": ntasks,
            "SLURM_NPROCS": ntasks,
            "SLURM_NTASKS_PER_NODE": str(shape.tasks_per_node),
            "SLURM_TASKS_PER_NODE": tasks_per_node_text([shape.tasks_per_node] * shape.nodes),
            "SLURM_SUBMIT_DIR": shape.submit_dir,
            "SLURM_SUBMIT_HOST": shape.submit_host,
            "SLURM_CLUSTER_NAME": CLUSTER_NAME,
            "SLURM_JOB_PARTITION": PARTITION,
            "SLURMD_NODENAME": names[0],
            "SLURM_TOPOLOGY_ADDR": names[0],
            "SLURM_NODEID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            LOCAL_DIR: control_dir,
        }
    )
    if shape.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(shape.cpus_per_task)
    if shape.restart_count > 0:
        env["SLURM_RESTART_COUNT"] = str(shape.restart_count)
    if shape.gpus is None:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run: no rank may pick up a GPU this machine happens to have
    else:
        env[LOCAL_GPUS] = ";".join(",".join(node) for node in shape.gpus)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(shape.gpus[0])
        env["SLURM_GPUS_ON_NODE"] = str(len(shape.gpus[0]))
    env["PATH"] = ":".join([*path_prefix, *([env["PATH"]] if env.get("PATH") else [])])
    return env


@dataclass(frozen=True)
class StepShape:
    """One srun step inside the job: its id, its nodes (a prefix of the job's) and tasks per node."""

    job_id: str
    step_id: int
    hosts: tuple[str, ...]
    tasks_per_node: int
    cpus_per_task: int | None = None
    hostlist: str = ""  # the step's node list as written in the environment; "" means a comma list
    gpus: tuple[tuple[str, ...], ...] | None = None

    @property
    def ntasks(self) -> int:
        return len(self.hosts) * self.tasks_per_node

    def rank(self, node_index: int, local_id: int) -> int:
        """Block distribution (srun's default): node 0 gets ranks 0..M-1, node 1 the next M, ..."""
        return node_index * self.tasks_per_node + local_id


def task_env(parent: Mapping[str, str], step: StepShape, node_index: int, local_id: int) -> dict[str, str]:
    """One task's environment, as slurmstepd sets it on top of the job's."""
    env = dict(parent)
    host = step.hosts[node_index]
    per_node = tasks_per_node_text([step.tasks_per_node] * len(step.hosts))
    step_nodes = step.hostlist or ",".join(step.hosts)
    first = step.rank(node_index, 0)
    env.update(
        {
            "SLURM_PROCID": str(step.rank(node_index, local_id)),
            "SLURM_LOCALID": str(local_id),
            "SLURM_NODEID": str(node_index),
            "SLURMD_NODENAME": host,
            "SLURM_TOPOLOGY_ADDR": host,
            "SLURM_NTASKS": str(step.ntasks),
            "SLURM_NPROCS": str(step.ntasks),
            "SLURM_NNODES": str(len(step.hosts)),
            "SLURM_NODELIST": step_nodes,
            "SLURM_TASKS_PER_NODE": per_node,
            "SLURM_STEP_ID": str(step.step_id),
            "SLURM_STEPID": str(step.step_id),
            "SLURM_STEP_NODELIST": step_nodes,
            "SLURM_STEP_NUM_NODES": str(len(step.hosts)),
            "SLURM_STEP_NUM_TASKS": str(step.ntasks),
            "SLURM_STEP_TASKS_PER_NODE": per_node,
            "SLURM_GTIDS": ",".join(str(first + i) for i in range(step.tasks_per_node)),
        }
    )
    if step.cpus_per_task:
        env["SLURM_CPUS_PER_TASK"] = str(step.cpus_per_task)
    if step.gpus is not None and node_index < len(step.gpus):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(step.gpus[node_index])
        env["SLURM_GPUS_ON_NODE"] = str(len(step.gpus[node_index]))
    return env


def parse_gpus(text: str) -> tuple[tuple[str, ...], ...] | None:
    """SLURMGEN_LOCAL_GPUS back into per-node groups; None when unset or empty."""
    if not text.strip():
        return None
    return tuple(tuple(g for g in node.split(",") if g) for node in text.split(";"))


def visible_gpus(environ: Mapping[str, str], device_names: Sequence[str]) -> list[str]:
    """The GPUs a local job may use: CUDA_VISIBLE_DEVICES when set (empty or -1: none), else /dev/nvidia<N>."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        ids = [g.strip() for g in environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
        return [] if not ids or ids[0] in ("-1", "NoDevFiles") else ids
    numbers = sorted(int(m.group(1)) for n in device_names if (m := re.fullmatch(r"nvidia(\d+)", n)))
    return [str(n) for n in numbers]


def gpu_slices(gpus: Sequence[str], nodes: int, per_node: int) -> tuple[tuple[str, ...], ...] | None:
    """Node i gets GPUs [i*per_node, (i+1)*per_node); None when there are not enough for every node."""
    if per_node <= 0 or len(gpus) < nodes * per_node:
        return None
    return tuple(tuple(gpus[i * per_node : (i + 1) * per_node]) for i in range(nodes))


_PATTERN = re.compile(r"%(\d*)([%jJsNntuxAa])")


def expand_output(
    pattern: str, *, job_id: str, step_id: int, node: str, node_index: int, task_id: int, user: str, job_name: str
) -> str:
    """srun's --output filename patterns (srun(1) "filename pattern"): %j %J %s %N %n %t %u %x %%, with an
    optional zero-padding width (`%3t`). %A/%a: an array task's step log pattern never uses them (see the script)."""

    def one(match: re.Match[str]) -> str:
        width, code = match.group(1), match.group(2)
        values = {
            "%": "%",
            "j": job_id,
            "J": f"{job_id}.{step_id}",
            "s": str(step_id),
            "N": node,
            "n": str(node_index),
            "t": str(task_id),
            "u": user,
            "x": job_name,
            "A": job_id,
            "a": "4294967294",  # Slurm's NO_VAL for "not an array task"
        }
        value = values[code]
        return value.zfill(int(width)) if width and code in "jsnt" else value

    return _PATTERN.sub(one, pattern)
