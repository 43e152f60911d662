"""A job submitted to a cluster over ssh (`submit --cluster NAME`): Slurm's commands run there through the cluster's one
shared connection; its state comes from one remote call (squeue, sacct, scontrol, then the run's own records:
slurmgen.backends.slurm_ssh.remote_status); its logs are copied here as they grow (slurmgen.backends.slurm_ssh.mirror)
and read like a local job's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.backends.interface import LogView, Report, Say
from slurmgen.backends.slurm_here.job import SlurmJob

if TYPE_CHECKING:
    from slurmgen.backends.slurm_ssh.remote_status import RemoteState
    from slurmgen.journal import Entry
    from slurmgen.queries.status import Row
    from slurmgen.remote.transport import Transport
    from slurmgen.spec.profile import ClusterProfile
    from slurmgen.submission.targets import Target

LOG_POLL = 2.0  # seconds between looks while `logs -f` finds nothing new: one round trip each


class RemoteJob(SlurmJob):
    def __init__(self, target: Target, entry: Entry, profile: ClusterProfile, base: Path) -> None:
        from slurmgen.backends.slurm_ssh.remote_status import transport_runner
        from slurmgen.remote.transport import transport_for
        from slurmgen.slurm.client import SlurmClient

        self.transport: Transport = transport_for(profile.name, profile.host, profile.control_persist)
        super().__init__(target, SlurmClient(run=transport_runner(self.transport)))
        self.entry = entry
        self.profile = profile
        self.copies = base / "remote" / profile.name / str(target.key)

    def remote_state(self) -> RemoteState:
        from slurmgen.backends.slurm_ssh.remote_status import remote_states

        key = str(self.target.key)
        return remote_states(self.transport, [key], {key: self.job_dir()}, self.target.cluster)[key]

    def job_dir(self) -> str:
        return f"{self.entry.log_dir}/{self.entry.name}-{self.target.key}"

    def status(self) -> Report:
        from slurmgen.queries import status as st

        row = remote_row(self.label, self.entry.name, self.remote_state())
        return Report(out=(st.table([row]),), notes=(f"cluster {self.profile.name}; code: {self.code()}",))

    def code(self) -> str:
        return code_of(self.entry.extra)

    def args(self) -> tuple[str, ...]:
        return self.entry.args

    def state(self) -> str:
        return self.remote_state().state

    def exit_code(self) -> int | None:
        from slurmgen.backends.slurm_ssh.remote_status import LIVE

        now = self.remote_state()
        return None if now.state in LIVE or now.state == "UNKNOWN" else now.exit_code

    def logs(self, rank: int | None, node: str | None) -> LogView:
        from slurmgen.backends.slurm_ssh.mirror import mirror
        from slurmgen.backends.slurm_ssh.remote_status import LIVE
        from slurmgen.queries import logs as lg

        prefix = f"{self.entry.name}-{self.target.key}"
        batch = [self.copies / f"{prefix}.log"]

        def files() -> list[Path]:
            mirror(self.transport, str(self.entry.log_dir), prefix, self.copies)
            return lg.select(batch, node, rank)

        def ended() -> bool:
            return self.remote_state().state not in LIVE

        return LogView(
            files=files,
            others=lambda: lg.select(batch, None),
            ended=ended,
            poll=LOG_POLL,
            missing=lambda: f"job {self.label} on cluster {self.profile.name}: no log files yet.",
            escape=True,  # copies of files on the cluster: their escape sequences are shown, never run here
        )

    def history_dirs(self) -> tuple[list[Path], str]:
        from slurmgen.backends.slurm_ssh.mirror import mirror

        prefix = f"{self.entry.name}-{self.target.key}"
        mirror(self.transport, str(self.entry.log_dir), prefix, self.copies)
        return [self.copies / prefix], f"job {self.label}: no run history on cluster {self.profile.name} yet"

    def resume(self, say: Say) -> Report:
        """As a job submitted here: requeued while Slurm knows it (through the connection), else its script on
        the cluster submitted again to start from its last saved state (slurm_ssh.once.resubmit_remote)."""
        import time

        from slurmgen.backends.slurm_ssh.once import resubmit_remote
        from slurmgen.journal import Journal, find_home, new_token
        from slurmgen.queries.resume import plan_resume
        from slurmgen.slurm.ids import cluster_label

        infos = self.client.show_jobs(self.target.job)
        if infos:
            step = plan_resume(self.target, infos)  # refuses a job that has not ended
            assert step.requeue_target is not None
            self.client.requeue(step.requeue_target)
            shown = cluster_label(self.target.cluster, str(step.requeue_target))
            return Report(notes=(step.message, f"done; follow it with: slurmgen status {shown}"))
        new = resubmit_remote(self.transport, self.entry, str(self.target.key), new_token(), Journal(find_home()),
                              time.time, say)  # fmt: skip
        return Report(out=(new,), notes=(
            f"Slurm no longer knows job {self.label}: its script on cluster {self.profile.name} was submitted again; "
            f"job {new} starts from job {self.target.key}'s last saved state",
            f"submitted job {new}; follow it with: slurmgen status {new}",
        ))  # fmt: skip


def code_of(extra: Mapping[str, object]) -> str:
    """The snapshot a remote job runs, and the commit it was taken from (the journal's record of the submit)."""
    if not extra.get("snapshot"):
        return f"{extra.get('code_dir')} (no snapshot)"
    dirty = " with uncommitted changes" if extra.get("dirty") else ""
    commit = extra.get("commit")
    of = f"of commit {str(commit)[:12]}" if commit else "(the repository had no commit yet)"
    return f"snapshot {str(extra.get('snapshot'))[:12]} {of}{dirty}"


def remote_row(label: str, name: str, now: RemoteState, submitted: str = "") -> Row:
    """A remote job's row: its state as the cluster answered, and which of Slurm's commands (or the run's own
    record) said it. Pure."""
    from slurmgen.queries.status import Row

    exit_text = "" if now.exit_code is None else str(now.exit_code)
    requeues = "" if now.requeues is None else str(now.requeues)  # "": the run's record was not read
    restarts = "" if now.step_restarts is None else str(now.step_restarts)
    return Row(label, name, now.state, reason=f"({now.source})", restarts=requeues, step_restarts=restarts,
               exit=exit_text, submitted=submitted)  # fmt: skip


def remote_rows(targets: Sequence[Target], base: Path, now: float) -> dict[int, Row]:
    """`slurmgen status` without an argument: the rows of the jobs in ``targets`` submitted over ssh, by their
    place in ``targets``. Each cluster is asked once for all of its jobs (remote_status: one round trip), never
    this machine's Slurm, which does not know them. A cluster that cannot be asked (the shared connection ended
    and the login cannot be made here: an expired second factor) raises its one line, TransportError: its jobs'
    states are not known, and none of them is shown as a job that Slurm forgot (MinJobAge)."""
    from slurmgen.backends.profile_kind import kind_of, profile_of
    from slurmgen.backends.slurm_ssh.remote_status import remote_states
    from slurmgen.queries.status import when

    # by profile, and by the cluster of a multi-cluster site behind it: one round trip each
    by_cluster: dict[tuple[str, str | None], list[tuple[int, RemoteJob]]] = {}
    for place, target in enumerate(targets):
        profile = profile_of(target.entry)
        if kind_of(profile) == "ssh" and profile is not None and target.entry is not None:
            job = RemoteJob(target, target.entry, profile, base)
            by_cluster.setdefault((profile.name, target.cluster), []).append((place, job))
    rows: dict[int, Row] = {}
    for (_, cluster), jobs in by_cluster.items():
        keys = [str(job.target.key) for _, job in jobs]
        dirs = {str(job.target.key): job.job_dir() for _, job in jobs}
        states = remote_states(jobs[0][1].transport, keys, dirs, cluster)
        for place, job in jobs:
            entry = job.entry
            rows[place] = remote_row(job.label, entry.name, states[str(job.target.key)], when(entry.time, now))
    return rows
