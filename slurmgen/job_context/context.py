"""`JobContext`: this process's job, read once from its environment at the entry point and passed down.

Its fields are the job variables (job_context/variables.py, generated from the contract's table) and what this
module derives from them: the job key, the run number, the lead time in whole seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from slurmgen import contract
from slurmgen.job_context.ranks import Ranks, process_rank, read_ranks
from slurmgen.job_context.values import key_from
from slurmgen.job_context.variables import JobVariables, read_variables

# The names of variables this module held before the contract's table did (callers import them from here).
BATCH_SCRIPT = contract.BATCH_SCRIPT
LOCAL_DIR = contract.LOCAL_DIR
NODE_CHECK_TIMEOUT = contract.NODE_CHECK_TIMEOUT
ELASTIC_RESTART_COUNT = contract.ELASTIC_RESTART_COUNT
ELASTIC_AGENT_STORE = contract.ELASTIC_AGENT_STORE
ELASTIC_SIGNALS = contract.ELASTIC_SIGNALS


@dataclass(frozen=True)
class JobContext(JobVariables):
    """This process's job, read once: its key, run, directories, preemption settings, budgets and limits."""

    key: str | None  # job_key_of: None outside Slurm
    requeue_marker: str | None  # the name of the marker a task leaves in state_dir for the batch shell (None: no key)
    run: int  # this run's number in the run history: 1 for the first (restart_count + 1)
    lead_seconds: int | None  # lead_time as the spec gave it (whole seconds), for the site's window
    environ: Mapping[str, str] = field(repr=False, compare=False)  # the whole environment, to hand to a child

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
    def from_environ(cls, environ: Mapping[str, str]) -> JobContext:
        read = read_variables(environ)
        key = key_from(environ)
        lead = environ.get(contract.LEAD_TIME, "")
        return cls(
            **read.__dict__,
            key=key,
            requeue_marker=None if key is None else contract.requeue_marker_name(key),
            run=read.restart_count + 1,
            lead_seconds=int(lead) if lead.isdigit() else None,
            environ=environ,
        )

    @classmethod
    def of(cls, source: JobContext | Mapping[str, str]) -> JobContext:
        """A context as given, or one read from a mapping (the entry points accept either)."""
        return source if isinstance(source, JobContext) else cls.from_environ(source)
