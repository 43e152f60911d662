"""The backend registry: one row per kind of job, keyed by the cluster profile of a submission (a profile with a
`host` is Slurm over ssh, any other Slurm here) or by a name (`local`: `slurmgen run`), and the one place where a
user's job argument becomes a handle: what `status`, `logs`, `history`, `cancel`, `requeue`, `resume` and
`slurmgen.Job` all take.

In order: an id a kind claims as its own (a row with `claims`), a local id (`local-3`: the local array or sweep whose
id it is, else that local job; `local-3_0`: one task), a Slurm job id (`123_4`: that task; `123`: the sweep it
belongs to, else the job), a sweep id (Slurm's or a local one, `<name>-local-<n>`), then a spec path or job/sweep
name: its newest job or sweep, submitted or run here. A job of the journal is attached by the kind its entry's
profile names. Reads the two journals once; asks Slurm nothing.

A new kind is one module (its Backend and handles) and one row of KINDS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.profile_kind import kind_of, profile_of
from slurmgen.errors import UsageError

if TYPE_CHECKING:
    from slurmgen.backends.emulated.group import LocalGroup
    from slurmgen.backends.interface import Backend, JobHandle, Report
    from slurmgen.backends.slurm_here.sweep import SlurmSweep
    from slurmgen.journal import Entry
    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.profile import ClusterProfile
    from slurmgen.submission.sweep_record import SweepRecord
    from slurmgen.submission.targets import Target


# A job of the submission journal as a handle of the kind its entry names: (the job and its entry, the entry's
# cluster profile, the journal's directory, this machine's Slurm client if given, the notes of its resolution).
AttachJob = Callable[["Target", "ClusterProfile | None", Path, "SlurmClient | None", tuple[str, ...]], "JobHandle"]
# A sweep of the submission journal as a handle of the kind its record names (record, profile, directory, client).
AttachSweep = Callable[["SweepRecord", "ClusterProfile | None", Path, "SlurmClient | None"], "SlurmSweep"]


@dataclass(frozen=True)
class Kind:
    """A row of the registry: how to make the kind's backend (from a cluster profile, and the journal's directory:
    None for the usual one); for a kind that records its jobs in the submission journal, how it attaches one of
    them (`job`) and one of its sweeps (`sweep`); for a kind whose ids are its own, which ids it claims and how it
    attaches one (`claims`, `attach`)."""

    make: Callable[[ClusterProfile | None, Path | None], Backend]
    claims: Callable[[str], bool] | None = None
    attach: Callable[[str, Path | None], JobHandle] | None = None
    job: AttachJob | None = None
    sweep: AttachSweep | None = None


def _slurm_here(profile: ClusterProfile | None, base: Path | None) -> Backend:
    from slurmgen.backends.slurm_here.backend import SlurmHere

    return SlurmHere(None, base)


def _slurm_ssh(profile: ClusterProfile | None, base: Path | None) -> Backend:
    from slurmgen.backends.slurm_ssh.backend import SlurmSsh

    if profile is None:
        raise UsageError("a remote submission needs a cluster profile with a host")
    return SlurmSsh(profile, base)


def _emulated(profile: ClusterProfile | None, base: Path | None) -> Backend:
    from slurmgen.backends.emulated.backend import Emulated

    return Emulated(base)


def _slurm_job(
    target: Target, profile: ClusterProfile | None, base: Path, client: SlurmClient | None, notes: tuple[str, ...]
) -> JobHandle:
    from slurmgen.backends.slurm_here.job import SlurmJob

    return SlurmJob(target, client, notes)


def _ssh_job(
    target: Target, profile: ClusterProfile | None, base: Path, client: SlurmClient | None, notes: tuple[str, ...]
) -> JobHandle:
    from slurmgen.backends.slurm_ssh.job import RemoteJob

    assert target.entry is not None and profile is not None  # kind_of named ssh: the entry's profile has a host
    return RemoteJob(target, target.entry, profile, base)


def _slurm_sweep_handle(
    record: SweepRecord, profile: ClusterProfile | None, base: Path, client: SlurmClient | None
) -> SlurmSweep:
    from slurmgen.backends.slurm_here.sweep import SlurmSweep

    return SlurmSweep(record, client)


def _ssh_sweep_handle(
    record: SweepRecord, profile: ClusterProfile | None, base: Path, client: SlurmClient | None
) -> SlurmSweep:
    from slurmgen.backends.slurm_ssh.sweep import RemoteSweep

    assert profile is not None
    return RemoteSweep(record, profile, base)


KINDS: dict[str, Kind] = {
    "slurm": Kind(_slurm_here, job=_slurm_job, sweep=_slurm_sweep_handle),
    "ssh": Kind(_slurm_ssh, job=_ssh_job, sweep=_ssh_sweep_handle),
    "local": Kind(_emulated),
}


def attach_job(target: Target, base: Path, client: SlurmClient | None = None, notes: tuple[str, ...] = ()
               ) -> JobHandle:  # fmt: skip
    """A job of the submission journal (or one Slurm knows and the journal does not) as its kind's handle."""
    profile = profile_of(target.entry)
    attach = KINDS[kind_of(profile)].job
    assert attach is not None
    return attach(target, profile, base, client, notes)


def backend_for(profile: ClusterProfile | None = None, base: Path | None = None) -> Backend:
    """The backend a submission with this cluster profile (or none) goes to."""
    return KINDS[kind_of(profile)].make(profile, base)


def backend_named(name: str, profile: ClusterProfile | None = None, base: Path | None = None) -> Backend:
    """The backend of a kind by its registry key (`slurm`, `ssh`, `local`, or a row added by a test)."""
    if name not in KINDS:
        raise UsageError(f"no kind of job {name!r}; the kinds are {', '.join(KINDS)}")
    return KINDS[name].make(profile, base)


def claimed(text: str) -> bool:
    """Whether a row of the registry claims ``text`` as an id of its own kind."""
    return any(kind.claims is not None and kind.claims(text.strip()) for kind in KINDS.values())


def _claimed(text: str, base: Path | None) -> JobHandle | None:
    for kind in KINDS.values():
        if kind.claims is not None and kind.attach is not None and kind.claims(text.strip()):
            return kind.attach(text.strip(), base)
    return None


def handle_of(text: str, client: SlurmClient | None = None, base: Path | None = None) -> JobHandle:
    from slurmgen.backends.emulated.lookup import by_local_id, by_sweep_id, of_record
    from slurmgen.journal import Journal, find_home
    from slurmgen.local.local_jobs import records
    from slurmgen.slurm.ids import local_label, parse_job_id
    from slurmgen.submission.targets import Target, resolve

    claimed = _claimed(text, base)
    if claimed is not None:
        return claimed
    base = find_home() if base is None else base
    journal = Journal(base)
    jobs, ran = journal.jobs(), records(base)
    local = by_local_id(base, ran, text)
    if local is not None:
        return local
    sweep = _slurm_sweep(text, jobs, client)
    if sweep is not None:
        return sweep
    local_sweep = by_sweep_id(base, ran, text)
    if local_sweep is not None:
        return local_sweep
    target = resolve(text, jobs, journal.path, local=[r.entry for r in ran])
    if target.local:  # a spec or name whose newest job ran here
        return of_record(base, ran, next(r for r in reversed(ran) if r.entry is target.entry))
    notes: tuple[str, ...] = ()
    try:
        parse_job_id(text)
    except UsageError:
        pass
    else:
        if target.entry is None and any(r.job_id == text.strip() for r in ran):
            notes = (f"note: {text.strip()} is Slurm's job {text.strip()}; the job run here is "
                     f"{local_label(text.strip())}",)  # fmt: skip
    return attach_job(Target(target.job, target.entry, named=target.named), base, client, notes)


def group_of(text: str, client: SlurmClient | None = None) -> SlurmSweep | LocalGroup:
    """`slurmgen.Sweep(text)`: the sweep (or local array) ``text`` names, by its id, spec, name or any job id of it
    (`123_4` too); a UsageError when it names no sweep. Reads the journals; asks Slurm nothing."""
    from slurmgen.backends.emulated.group import LocalGroup
    from slurmgen.backends.slurm_here.sweep import SlurmSweep
    from slurmgen.journal import Journal, find_home
    from slurmgen.submission.sweep_record import load_record, sweep_id_of

    jobs = Journal(find_home()).jobs()
    sweep_id = sweep_id_of(str(text), jobs)
    if sweep_id is not None:
        return sweep_handle(load_record(sweep_id, jobs), client)
    try:
        found = handle_of(str(text), client)
    except UsageError:
        found = None
    if isinstance(found, (SlurmSweep, LocalGroup)):
        return found
    raise UsageError(f"{text!s}: no sweep of that id, spec, name or job id in the journal")


def plain_handle(job_id: str, client: SlurmClient | None = None) -> JobHandle:
    """`slurmgen.Job(id)`: a job id as it is, never the sweep its array belongs to; a local id as handle_of reads
    it. Reads the journal (for the job's logs and script); asks Slurm nothing."""
    from slurmgen.journal import Journal, find, find_home
    from slurmgen.slurm.ids import parse_cluster_job, parse_local_id
    from slurmgen.submission.targets import Target

    if parse_local_id(job_id) is not None or claimed(job_id):
        return handle_of(job_id, client)
    cluster, job = parse_cluster_job(job_id)
    base = find_home()
    return attach_job(Target(job, find(Journal(base).jobs(), str(job), cluster), named=cluster), base, client)


def _slurm_sweep(text: str, jobs: list[Entry], client: SlurmClient | None) -> JobHandle | None:
    """The Slurm sweep ``text`` names (its id, spec, name, or its array's job id; `123_4` is one point's task)."""
    from slurmgen.slurm.ids import parse_cluster_job
    from slurmgen.submission.sweep_record import load_record, sweep_id_of

    try:
        if parse_cluster_job(text)[1].array_task is not None:
            return None
    except UsageError:
        pass
    sweep_id = sweep_id_of(text, jobs)
    return None if sweep_id is None else sweep_handle(load_record(sweep_id, jobs), client)


def sweep_handle(record: SweepRecord, client: SlurmClient | None = None) -> SlurmSweep:
    """A sweep's handle of the kind its journal record names (over ssh for a cluster profile with a host, else
    through this machine's Slurm commands, ``client``)."""
    from slurmgen.journal import find_home

    profile = profile_of(record.first)
    attach = KINDS[kind_of(profile)].sweep
    assert attach is not None
    return attach(record, profile, find_home(), client)


def recent(client: SlurmClient | None = None) -> Report:
    """`slurmgen status` without an argument: the journal's recent jobs, submitted and run here."""
    import time

    from slurmgen.backends.emulated.job import target_of
    from slurmgen.backends.interface import Report
    from slurmgen.backends.slurm_ssh.job import remote_rows
    from slurmgen.journal import Journal, find_home
    from slurmgen.local.local_jobs import records, row
    from slurmgen.queries import status as st
    from slurmgen.queries.history import last_failing, restart_lines, step_restarts, window_warnings
    from slurmgen.slurm.client import SlurmClient

    base = find_home()
    journal = Journal(base)
    client = client or SlurmClient()
    targets, extra, notes = st.recent(journal, client)
    now = time.time()
    # a local job's step restarts come from its run history, as in its own status (backends/emulated/job.py)
    ran = [row(r, now, step_restarts(target_of(r), [])) for r in records(base)[-st.RECENT :]]
    if not targets and not extra and not ran:
        return Report(notes=(*notes, f"no jobs in the journal {journal.path}; submit one with `slurmgen submit SPEC` "
                             "or run one with `slurmgen run SPEC`"))  # fmt: skip
    if not targets:  # only local jobs and unresolved submissions: nothing to ask Slurm
        return Report(out=(st.table([*extra, *ran]),), notes=tuple(notes))
    # jobs submitted over ssh are asked of their cluster, the others of this machine's Slurm, in journal order
    remote = remote_rows(targets, base, now)
    rows: list[st.Row] = []
    unknown: list[Target] = []
    here: list[Target] = []
    for place, target in enumerate(targets):
        if place in remote:
            rows.append(remote[place])
            continue
        here.append(target)
        found, missing = st.rows_for([target], client, failing=last_failing, step_restarts=step_restarts)
        rows += found
        unknown += missing
    if unknown and not rows:
        from slurmgen.queries.control import unknown_job

        raise unknown_job(unknown[0].job)
    lines = (*notes, *window_warnings(here), *restart_lines(here))
    return Report(out=(st.table([*rows, *extra, *ran]),), notes=lines)
