"""Which job run here an id names: a local id (`local-3`: the local array or sweep whose id it is, else that
local job; `local-3_0`: one task), a local sweep's id (`<name>-local-<n>`), or a record of the local journal (the
newest job of a spec). Reads what the local journal holds; asks nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.interface import JobHandle
    from slurmgen.local.local_jobs import LocalRecord


def by_local_id(base: Path, ran: list[LocalRecord], text: str) -> JobHandle | None:
    """The handle of a local id (`local-3`, `local-3_0`); None when ``text`` is no local id; a UsageError when no
    job run here has it."""
    from slurmgen.backends.emulated.job import LocalJob
    from slurmgen.journal import Journal
    from slurmgen.slurm.ids import local_label, parse_local_id

    number = parse_local_id(text)
    if number is None:
        return None
    group = _group(base, ran, local_label(number), lambda r: r.key.partition("_")[0] == number and "_" in r.key)
    if group is not None and "_" not in number:
        return group
    found = [r for r in ran if number in (r.job_id, r.key)]
    if not found:
        raise UsageError(f"no local job {text.strip()} in {Journal(base).path.parent / 'local'}; run the command in "
                         "the directory that ran it")  # fmt: skip
    return LocalJob(base, found[-1])


def by_sweep_id(base: Path, ran: list[LocalRecord], text: str) -> JobHandle | None:
    """The local sweep whose id ``text`` is (`<name>-local-<n>`); None when no sweep run here has it."""
    return _group(base, ran, text.strip(), lambda r: sweep_of(r) == text.strip())


def of_record(base: Path, ran: list[LocalRecord], record: LocalRecord) -> JobHandle:
    """The handle of a job run here: its sweep's when it was a point of one, else its own."""
    from slurmgen.backends.emulated.job import LocalJob

    sweep_id = sweep_of(record)
    if sweep_id is not None:
        group = _group(base, ran, sweep_id, lambda r: sweep_of(r) == sweep_id)
        assert group is not None
        return group
    return LocalJob(base, record)


def sweep_of(record: LocalRecord) -> str | None:
    from slurmgen.local.local_jobs import SWEEP_EXTRA

    sweep = record.entry.extra.get(SWEEP_EXTRA)
    return sweep if isinstance(sweep, str) else None


def _group(base: Path, ran: list[LocalRecord], label: str, member: Callable[[LocalRecord], bool]) -> JobHandle | None:
    from slurmgen.backends.emulated.group import LocalGroup

    found = [r for r in ran if member(r)]
    if not found:
        return None
    return LocalGroup(base, sweep_of(found[0]) or label, found)
