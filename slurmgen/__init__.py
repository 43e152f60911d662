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


def _load(name: str) -> object:
    """The public name ``name``, imported from its module; each branch is a plain import, read by the type checker
    and tests/test_layers.py like any other."""
    if name == "Job":
        from slurmgen.api.job import Job

        return Job
    if name == "status":
        from slurmgen.api.query import status

        return status
    if name == "submit":
        from slurmgen.api.submitting import submit

        return submit
    if name == "Sweep":
        from slurmgen.api.sweep import Sweep

        return Sweep
    if name == "submit_sweep":
        from slurmgen.api.sweep import submit_sweep

        return submit_sweep
    if name == "InvalidJobId":
        from slurmgen.slurm.client import InvalidJobId

        return InvalidJobId
    if name == "SchedulerTimeout":
        from slurmgen.slurm.client import SchedulerTimeout

        return SchedulerTimeout
    from slurmgen import errors

    found = {
        "SlurmgenError": errors.SlurmgenError,
        "SpecError": errors.SpecError,
        "UsageError": errors.UsageError,
        "SchedulerError": errors.SchedulerError,
        "SchedulerMissing": errors.SchedulerMissing,
    }
    if name not in found:
        raise AttributeError(f"module 'slurmgen' has no attribute {name!r}")
    return found[name]


def __getattr__(name: str) -> object:  # PEP 562
    if name not in __all__:
        raise AttributeError(f"module 'slurmgen' has no attribute {name!r}")
    value = _load(name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> "list[str]":  # quoted: a Python below the in-job floor must get as far as slurmgen.python_floor
    return sorted({*globals(), *__all__})
