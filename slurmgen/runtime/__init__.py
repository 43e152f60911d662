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

# The oldest Python the runtime runs on (slurmgen.python_floor.RUNTIME, pyproject.toml's requires-python; not
# imported, as this package imports nothing). A program on an older one gets one line instead of a SyntaxError or
# TypeError deep inside a task. The batch shell's helper, whose floor is lower and checked by its own package,
# imports the checkpoint layout from here (checkpoint file names) and passes.
MIN_PYTHON = (3, 10)
if _sys.version_info < MIN_PYTHON and "slurmgen.batch" not in _sys.modules:
    _message = (
        f"slurmgen's runtime needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer in the task; this is "
        f"{_sys.version.split()[0]} ({_sys.executable}): use a newer image or set the spec field python"
    )
    # `python -m slurmgen.runtime.launch`, the legacy name: runpy sets argv[0] to "-m" while it imports.
    if _sys.argv[:1] == ["-m"]:
        print(f"slurmgen: {_message}", file=_sys.stderr)
        raise SystemExit(1)
    raise ImportError(_message)

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


def _load(name: str) -> object:
    """The public name ``name``, imported from its module when first asked for: a plain import per name, read by
    the type checker and tests/test_layers.py like any other."""
    if name == "expand_hostlist":
        from slurmgen.slurm.hostlist import expand_hostlist

        return expand_hostlist
    if name == "HostlistError":
        from slurmgen.slurm.hostlist import HostlistError

        return HostlistError
    if name == "get_distrib_size":
        from slurmgen.job_context.public import get_distrib_size

        return get_distrib_size
    if name == "restart_count":
        from slurmgen.job_context.public import restart_count

        return restart_count
    if name == "job_key":
        from slurmgen.job_context.public import job_key

        return job_key
    if name == "is_slurm_batch_job":
        from slurmgen.job_context.public import is_slurm_batch_job

        return is_slurm_batch_job
    if name == "is_rank_zero":
        from slurmgen.job_context.public import is_rank_zero

        return is_rank_zero
    if name == "block_preemption_signal":
        from slurmgen.task.signal_block import block_preemption_signal

        return block_preemption_signal
    if name == "preemption_signal":
        from slurmgen.task.signal_block import preemption_signal

        return preemption_signal
    if name == "init_distributed":
        from slurmgen.runtime.dist import init_distributed

        return init_distributed
    if name == "barrier":
        from slurmgen.runtime.dist import barrier

        return barrier
    if name == "destroy":
        from slurmgen.runtime.dist import destroy

        return destroy
    if name == "DistInfo":
        from slurmgen.runtime.dist import DistInfo

        return DistInfo
    if name == "SlurmgenWarning":
        from slurmgen.errors import SlurmgenWarning

        return SlurmgenWarning
    if name == "BarrierTimeout":
        from slurmgen.runtime.store_barrier import BarrierTimeout

        return BarrierTimeout
    if name == "seed_everything":
        from slurmgen.runtime.parallel import seed_everything

        return seed_everything
    if name == "wrap_ddp":
        from slurmgen.runtime.parallel import wrap_ddp

        return wrap_ddp
    if name == "build_mesh":
        from slurmgen.runtime.parallel import build_mesh

        return build_mesh
    if name == "Preemption":
        from slurmgen.runtime.preemption import Preemption

        return Preemption
    if name == "ModelOptimizerState":
        from slurmgen.runtime.checkpoint.state_tree import ModelOptimizerState

        return ModelOptimizerState
    if name == "SaveRecord":
        from slurmgen.runtime.checkpoint.record import SaveRecord

        return SaveRecord
    if name == "fits_window":
        from slurmgen.runtime.checkpoint.record import fits_window

        return fits_window
    if name == "CheckpointError":
        from slurmgen.runtime.checkpoint.commit import CheckpointError

        return CheckpointError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __getattr__(name: str) -> object:
    value = _load(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
