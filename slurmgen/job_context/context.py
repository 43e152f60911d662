"""`JobContext`: this process's job, read once from its environment at the entry point and passed down.

Its fields and `from_environ` are JobVariables' (job_context/variables.py, generated from the contract's table):
the job variables, each typed by its parser, and what derives from them (the job key, the run number). This module
adds where the process sits, read on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

from slurmgen import contract
from slurmgen.job_context.ranks import Ranks, process_rank, read_ranks
from slurmgen.job_context.variables import JobVariables

# The names of variables this module held before the contract's table did (callers import them from here).
BATCH_SCRIPT = contract.BATCH_SCRIPT
LOCAL_DIR = contract.LOCAL_DIR
NODE_CHECK_TIMEOUT = contract.NODE_CHECK_TIMEOUT
ELASTIC_RESTART_COUNT = contract.ELASTIC_RESTART_COUNT
ELASTIC_AGENT_STORE = contract.ELASTIC_AGENT_STORE
ELASTIC_SIGNALS = contract.ELASTIC_SIGNALS


class JobContext(JobVariables):
    """This process's job, read once: its key, run, directories, preemption settings, budgets and limits.

    A plain subclass: JobVariables is the one frozen dataclass (its fields, equality, `dataclasses.replace`), so
    that every process, which imports this, builds one 54-field dataclass at import, not two."""

    @cached_property
    def ranks(self) -> Ranks:
        """Where this process sits: torchrun's variables, else Slurm's, else a single process. Read on first use:
        the batch shell has none, and an inconsistent pair is an error only for a process that asks."""
        return read_ranks(self.environ)

    @cached_property
    def rank(self) -> int:
        """This process's rank from the environment, never an error (job_context.ranks.process_rank): for a
        question about rank 0 or a name in a message; `ranks` where the world size matters."""
        return process_rank(self.environ)

    @classmethod
    def of(cls, source: JobContext | Mapping[str, str]) -> JobContext:
        """A context as given, or one read from a mapping (the entry points accept either)."""
        return source if isinstance(source, JobContext) else cls.from_environ(source)
