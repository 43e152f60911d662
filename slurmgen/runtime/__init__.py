"""The runtime that runs inside every task: ranks, rendezvous, interface, process group, barriers.

Importing this package loads nothing but itself: each public name is imported from its module on first use
(PEP 562), and torch only inside the functions that need it. A task that never calls the runtime pays
nothing for it; a test checks this in a fresh interpreter.
"""

# No `import typing`, `importlib` or `__future__` here: typing alone costs more than the whole budget
# (bench/runtime_import.py). mypy treats a module-level TYPE_CHECKING = False like typing's.
TYPE_CHECKING = False

_EXPORTS = {
    "expand_hostlist": "hostlist",
    "HostlistError": "hostlist",
    "get_distrib_size": "env",
    "restart_count": "env",
    "job_key": "env",
    "is_slurm_batch_job": "env",
    "is_rank_zero": "env",
    "block_preemption_signal": "signals",
    "preemption_signal": "signals",
    "init_distributed": "dist",
    "barrier": "dist",
    "destroy": "dist",
    "DistInfo": "dist",
    "SlurmgenWarning": "dist",
    "BarrierTimeout": "store_barrier",
    "seed_everything": "parallel",
    "wrap_ddp": "parallel",
    "build_mesh": "parallel",
    "Preemption": "preemption",
    "ModelOptimizerState": "checkpoint.state_tree",
    "SaveRecord": "checkpoint.record",
    "fits_window": "checkpoint.record",
    "CheckpointError": "checkpoint.commit",
}

__all__ = [
    "BarrierTimeout",
    "CheckpointError",
    "DistInfo",
    "HostlistError",
    "ModelOptimizerState",
    "Preemption",
    "SaveRecord",
    "SlurmgenWarning",
    "barrier",
    "block_preemption_signal",
    "build_mesh",
    "destroy",
    "expand_hostlist",
    "fits_window",
    "get_distrib_size",
    "init_distributed",
    "is_rank_zero",
    "is_slurm_batch_job",
    "job_key",
    "preemption_signal",
    "restart_count",
    "seed_everything",
    "wrap_ddp",
]

if TYPE_CHECKING:
    from slurmgen.runtime.checkpoint.commit import CheckpointError
    from slurmgen.runtime.checkpoint.record import SaveRecord, fits_window
    from slurmgen.runtime.checkpoint.state_tree import ModelOptimizerState
    from slurmgen.runtime.dist import DistInfo, SlurmgenWarning, barrier, destroy, init_distributed
    from slurmgen.runtime.env import (
        get_distrib_size,
        is_rank_zero,
        is_slurm_batch_job,
        job_key,
        restart_count,
    )
    from slurmgen.runtime.hostlist import HostlistError, expand_hostlist
    from slurmgen.runtime.parallel import build_mesh, seed_everything, wrap_ddp
    from slurmgen.runtime.preemption import Preemption
    from slurmgen.runtime.signals import block_preemption_signal, preemption_signal
    from slurmgen.runtime.store_barrier import BarrierTimeout


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(f"{__name__}.{module}", fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
