"""slurmgen: YAML job specs to SLURM batch scripts, and the runtime that runs inside every task.

The Python API (docs/api.md): `slurmgen.submit(spec)`, `slurmgen.Job(job_id)`, `slurmgen.status(ids)`,
`slurmgen.submit_sweep(spec)` and `slurmgen.Sweep(id)`, and the errors they raise. Every name is loaded on first
use (PEP 562 `__getattr__`): `import slurmgen`, which every task pays for through `import slurmgen.runtime`,
imports nothing.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing alone would cost every task start
if TYPE_CHECKING:  # what mypy and editors see; at run time __getattr__ loads each name when first asked for
    from slurmgen.api.job import Job
    from slurmgen.api.query import status
    from slurmgen.api.submitting import submit
    from slurmgen.api.sweep import Sweep, submit_sweep
    from slurmgen.errors import (
        SchedulerError,
        SchedulerMissing,
        SlurmgenError,
        SpecError,
        UsageError,
    )
    from slurmgen.slurm.client import InvalidJobId, SchedulerTimeout

_LAZY = {
    "Job": "slurmgen.api.job",
    "status": "slurmgen.api.query",
    "submit": "slurmgen.api.submitting",
    "Sweep": "slurmgen.api.sweep",
    "submit_sweep": "slurmgen.api.sweep",
    "SlurmgenError": "slurmgen.errors",
    "SpecError": "slurmgen.errors",
    "UsageError": "slurmgen.errors",
    "SchedulerError": "slurmgen.errors",
    "SchedulerMissing": "slurmgen.errors",
    "SchedulerTimeout": "slurmgen.slurm.client",
    "InvalidJobId": "slurmgen.slurm.client",
}

__all__ = [
    "InvalidJobId",
    "Job",
    "SchedulerError",
    "SchedulerMissing",
    "SchedulerTimeout",
    "SlurmgenError",
    "SpecError",
    "Sweep",
    "UsageError",
    "__version__",
    "status",
    "submit",
    "submit_sweep",
]


def __getattr__(name: str) -> object:  # PEP 562
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slurmgen' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
