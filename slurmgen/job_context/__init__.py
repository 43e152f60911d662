"""Who this job is and what it was given, read from the environment once per process.

The rendered script exports the contract's variables (slurmgen/contract.py), Slurm and torchrun export their own;
the batch shell's helper (slurmgen.batch), each task's supervisor (slurmgen.task) and the user's program
(slurmgen.runtime) each build one `JobContext` from them at start and pass it (or the few fields a function needs)
down, instead of parsing the same variables again at every hop. This package is the only place of slurmgen that
reads those variables (tests/test_context_reads.py). `context` holds JobContext, `variables` its fields and
their parse (generated from the contract's table by `generate`), `values` the parse of each variable, `ranks` where
this process sits (torchrun's variables first, then Slurm's, else a single process),
`public` the runtime's functions over them. This file imports none of them at import time: a package that does is
a circle (tests/test_layers.py), so callers import the module they need (the old module's names still resolve).

The job-key rule (the id that names this job to `scontrol`) is slurmgen.slurm.ids.job_key_of; `key_from` applies it
to Slurm's variables, and the rendered script computes the same key in bash from `KEY_SHELL`, written beside it.

Standard library only (contract, errors and slurm.ids are standard-library leaves): every process imports it.
"""

# The names callers imported from here when this was one module, given on first use
# (PEP 562): a package that imports its own modules at import time is a circle (tests/test_layers.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurmgen.job_context.context import JobContext
    from slurmgen.job_context.values import KEY_SHELL, int_variable, key_from, restart_count_from

_MOVED = {
    "JobContext": "slurmgen.job_context.context",
    "KEY_SHELL": "slurmgen.job_context.values",
    "int_variable": "slurmgen.job_context.values",
    "key_from": "slurmgen.job_context.values",
    "restart_count_from": "slurmgen.job_context.values",
}
__all__ = ["KEY_SHELL", "JobContext", "int_variable", "key_from", "restart_count_from"]


def __getattr__(name: str) -> object:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_MOVED[name]), name)
