"""Legacy name of each task's entry point (slurmgen.contract.LEGACY_ENTRIES): scripts rendered before the move to
slurmgen.task, of jobs still queued when slurmgen was upgraded, run ``python3 -m slurmgen.runtime.launch`` (or,
in a container, ``from slurmgen.runtime.launch import main``)."""

from slurmgen.task.launch import main

__all__ = ["main"]
