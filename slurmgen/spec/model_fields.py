"""Generated from spec/fields.py by `python -m slurmgen.spec.generate`: do not edit.

The fields of the resolved job spec, one frozen dataclass per table. Derived fields and methods are hand-written
in spec/model.py (JobSpec extends JobFields).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmgen.spec.sweep_points import SweepSpec


@dataclass(frozen=True)
class TorchrunSpec:
    extra_args: tuple[str, ...]


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
    signal: str
    handler: str
    lead_time: int
    max_requeues: int
    max_preemptions: int | None
    keep: int
    requeue_on_failure: bool
    state_dir: str


@dataclass(frozen=True)
class RecoverySpec:
    enabled: bool
    max_restarts: int
    hang_timeout: int
    spare_nodes: int
    health_check: tuple[str, ...]
    expedite: bool


@dataclass(frozen=True)
class ProgressSpec:
    pattern: str
    total: int | None


@dataclass(frozen=True)
class CheckpointSpec:
    path: str


@dataclass(frozen=True)
class ResumeSpec:
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ContainerSpec:
    runtime: str
    gpu: str | None
    image: str
    python: str | None
    mounts: tuple[str, ...]
    env: tuple[str, ...]
    workdir: str | None
    name: str | None
    mount_home: bool | None
    writable: bool | None
    writable_tmpfs: bool | None
    cleanenv: bool | None
    containall: bool | None


@dataclass(frozen=True)
class TrackersSpec:
    wandb: bool


@dataclass(frozen=True)
class JobFields:
    name: str
    command: tuple[str, ...]
    time: str | None
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    nproc_per_node: int
    cpus_per_task: int | None
    mem: str | None
    partition: str | None
    account: str | None
    qos: str | None
    constraint: str | None
    launcher: str
    torchrun: TorchrunSpec
    python: str
    distributed: DistributedSpec
    preemption: PreemptionSpec
    recovery: RecoverySpec
    progress: ProgressSpec | None
    checkpoint: CheckpointSpec | None
    resume: ResumeSpec | None
    env: tuple[tuple[str, str], ...]
    setup: tuple[str, ...]
    setup_fail_fast: bool
    teardown: tuple[str, ...]
    container: ContainerSpec | None
    trackers: TrackersSpec
    output: str
    error: str | None
    chdir: str | None
    steps: int
    array: str | None
    sweep: SweepSpec | None
    dependency: str | None
    sbatch: tuple[tuple[str, str | None], ...]
    srun: tuple[tuple[str, str | None], ...]
