"""The library the user's program imports: process group, barriers, Preemption, the checkpoint store.

Only what a training program calls lives here (dist, store, store_barrier, parallel, state, peer_loss,
preemption, checkpoint/). The batch shell's helper is slurmgen.batch, each task's entry point and supervisor
slurmgen.task; ``runtime/batch/`` and ``runtime/launch/`` are only their old names, kept for scripts rendered
before the split (slurmgen.contract.LEGACY_ENTRIES). Imports point down only: this package may use slurmgen.task
(rank discovery, rendezvous, the signal mask) and the shared modules, never slurmgen.batch (tests/test_layers.py).

Import-cost rule: importing this package loads nothing but itself (no torch, typer, jinja2, yaml, not even
typing) and costs under 10 ms (bench/runtime_import.py prints the table): each public name is imported from its
module on first use (PEP 562), and torch only inside the functions that need it. A task that never calls the
runtime pays nothing for it; tests/runtime/test_runtime_import.py checks this in a fresh interpreter.
"""

import sys as _sys

# No `import typing`, `importlib` or `__future__` here: typing alone costs more than the whole budget
# (bench/runtime_import.py). mypy treats a module-level TYPE_CHECKING = False like typing's.
TYPE_CHECKING = False

# The oldest Python the runtime is tested with (the test suite runs it, torch included). A container with an
# older one gets one line instead of a SyntaxError or TypeError deep inside a task.
MIN_PYTHON = (3, 11)
if _sys.version_info < MIN_PYTHON:
    _message = (
        f"slurmgen's runtime needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer in the task; this is "
        f"{_sys.version.split()[0]} ({_sys.executable}): use a newer image or set the spec field python"
    )
    # `python -m slurmgen.runtime.launch`, the legacy name: runpy sets argv[0] to "-m" while it imports.
    if _sys.argv[:1] == ["-m"]:
        print(f"slurmgen: {_message}", file=_sys.stderr)
        raise SystemExit(1)
    raise ImportError(_message)

_EXPORTS = {
    "expand_hostlist": "slurmgen.slurm.hostlist",
    "HostlistError": "slurmgen.slurm.hostlist",
    "get_distrib_size": "slurmgen.job_context.public",
    "restart_count": "slurmgen.job_context.public",
    "job_key": "slurmgen.job_context.public",
    "is_slurm_batch_job": "slurmgen.job_context.public",
    "is_rank_zero": "slurmgen.job_context.public",
    "block_preemption_signal": "slurmgen.task.signal_block",
    "preemption_signal": "slurmgen.task.signal_block",
    "init_distributed": "dist",
    "barrier": "dist",
    "destroy": "dist",
    "DistInfo": "dist",
    "SlurmgenWarning": "slurmgen.errors",
    "BarrierTimeout": "store_barrier",
    "seed_everything": "parallel",
    "wrap_ddp": "parallel",
    "build_mesh": "parallel",
    "Preemption": "preemption",
    "ModelOptimizerState": "slurmgen.runtime.checkpoint.state_tree",
    "SaveRecord": "slurmgen.runtime.checkpoint.record",
    "fits_window": "slurmgen.runtime.checkpoint.record",
    "CheckpointError": "slurmgen.runtime.checkpoint.commit",
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
    from slurmgen.errors import SlurmgenWarning
    from slurmgen.job_context.public import (
        get_distrib_size,
        is_rank_zero,
        is_slurm_batch_job,
        job_key,
        restart_count,
    )
    from slurmgen.runtime.checkpoint.commit import CheckpointError
    from slurmgen.runtime.checkpoint.record import SaveRecord, fits_window
    from slurmgen.runtime.checkpoint.state_tree import ModelOptimizerState
    from slurmgen.runtime.dist import DistInfo, barrier, destroy, init_distributed
    from slurmgen.runtime.parallel import build_mesh, seed_everything, wrap_ddp
    from slurmgen.runtime.preemption import Preemption
    from slurmgen.runtime.store_barrier import BarrierTimeout
    from slurmgen.slurm.hostlist import HostlistError, expand_hostlist
    from slurmgen.task.signal_block import block_preemption_signal, preemption_signal


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    path = module if "." in module else f"{__name__}.{module}"
    value = getattr(__import__(path, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
