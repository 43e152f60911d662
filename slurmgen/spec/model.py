"""The job spec as the rest of slurmgen sees it: frozen values with every default resolved.

Built by slurmgen.spec.load from a YAML file; rendered by slurmgen.script, planned by slurmgen.jobs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from slurmgen.errors import Problem

if TYPE_CHECKING:
    from slurmgen.spec.sweep import SweepSpec


@dataclass(frozen=True)
class DistributedSpec:
    backend: str
    port: int
    port_range: int
    timeout: int
    barrier_timeout: int


@dataclass(frozen=True)
class PreemptionSpec:
    enabled: bool
    signal: str  # canonical name without SIG, e.g. "USR1"
    handler: str  # contract.HANDLERS: auto, runtime, program, requeue
    lead_time: int
    max_requeues: int
    max_preemptions: int | None  # None: no limit
    keep: int  # complete sharded checkpoints kept
    requeue_on_failure: bool
    state_dir: str


@dataclass(frozen=True)
class RecoverySpec:
    enabled: bool
    max_restarts: int  # restarts of the step inside the allocation per run (0: none)
    hang_timeout: int  # seconds without progress on any rank (0: no watchdog)
    spare_nodes: int
    health_check: tuple[str, ...]  # argv; empty: none


def node_checks(spec: JobSpec) -> bool:
    """Are the allocation's nodes checked before every start of the step (batch/nodes.py)? When the spec
    asks (a health check, spare nodes), and for every GPU job with recovery on: a CPU job with neither has only
    its state directory to check, which the batch shell's own mkdir and the first save already show, and one
    more job step per start would cost it about a second for nothing."""
    rec = spec.recovery
    return bool(rec.health_check) or rec.spare_nodes > 0 or (rec.enabled and spec.gpus_per_node > 0)


@dataclass(frozen=True)
class ContainerSpec:
    image: str
    mounts: tuple[str, ...]
    workdir: str | None
    name: str | None
    mount_home: bool | None
    writable: bool | None


@dataclass(frozen=True)
class TrackersSpec:
    wandb: bool  # export WANDB_RUN_ID / WANDB_RESUME from the run identity


@dataclass(frozen=True)
class JobSpec:
    name: str
    command: tuple[str, ...]
    time: str  # normalised D-HH:MM:SS / HH:MM:SS, whole minutes; "UNLIMITED" when none
    time_seconds: int | None
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    nproc_per_node: int  # processes per node: tasks_per_node (srun) or torchrun workers
    cpus_per_task: int | None
    mem: str | None
    partition: str | None
    account: str | None
    qos: str | None
    constraint: str | None
    launcher: str
    python: str
    distributed: DistributedSpec
    preemption: PreemptionSpec
    recovery: RecoverySpec
    env: tuple[tuple[str, str], ...]
    setup: tuple[str, ...]
    container: ContainerSpec | None
    output: str
    chdir: str | None
    array: str | None
    dependency: str | None
    sbatch: tuple[tuple[str, str | None], ...]  # None value: a flag
    trackers: TrackersSpec = TrackersSpec(wandb=True)
    sweep: SweepSpec | None = None  # the points of a sweep (slurmgen.spec.sweep); None for a single job

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.sweep is None:
            del out["sweep"]  # a job without a sweep keeps the digest it had before sweeps existed
        return out

    @cached_property  # frozen: computed once (render and the submit plan both ask for it)
    def digest(self) -> str:
        """Short hash of the resolved spec: keys the resume state to this exact job definition."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class LoadedSpec:
    spec: JobSpec
    warnings: tuple[Problem, ...]
