"""A job submitted to a cluster over ssh (`submit --cluster NAME`): Slurm's commands run there through the
cluster's one shared connection; its state comes from one remote call (squeue, sacct, scontrol, then the run's
own records: slurmgen.remote.remote_status); its logs are copied here as they grow (slurmgen.remote.mirror) and
read like a local job's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from slurmgen.jobkind import LogView, Report, Say
from slurmgen.jobkind.slurm_job import SlurmJob

if TYPE_CHECKING:
    from slurmgen.journal import Entry
    from slurmgen.manage.targets import Target
    from slurmgen.remote.remote_status import RemoteState
    from slurmgen.remote.transport import Transport
    from slurmgen.spec.profile import ClusterProfile

LOG_POLL = 2.0  # seconds between looks while `logs -f` finds nothing new: one round trip each


class RemoteJob(SlurmJob):
    def __init__(self, target: Target, entry: Entry, profile: ClusterProfile, base: Path) -> None:
        from slurmgen.remote.remote_status import transport_runner
        from slurmgen.remote.transport import transport_for
        from slurmgen.slurm.client import SlurmClient

        self.transport: Transport = transport_for(profile.name, profile.host, profile.control_persist)
        super().__init__(target, SlurmClient(run=transport_runner(self.transport)))
        self.entry = entry
        self.profile = profile
        self.copies = base / "remote" / profile.name / str(target.key)

    def remote_state(self) -> RemoteState:
        from slurmgen.remote.remote_status import remote_states

        key = str(self.target.key)
        return remote_states(self.transport, [key], {key: self._job_dir()})[key]

    def _job_dir(self) -> str:
        return f"{self.entry.log_dir}/{self.entry.name}-{self.target.key}"

    def status(self) -> Report:
        from slurmgen.manage import status as st

        now = self.remote_state()
        exit_text = "" if now.exit_code is None else str(now.exit_code)
        row = st.Row(self.label, self.entry.name, now.state, reason=f"({now.source})", exit=exit_text)
        return Report(out=(st.table([row]),), notes=(f"cluster {self.profile.name}; code: {self.code()}",))

    def code(self) -> str:
        return code_of(self.entry.extra)

    def state(self) -> str:
        return self.remote_state().state

    def exit_code(self) -> int | None:
        from slurmgen.remote.remote_status import LIVE

        now = self.remote_state()
        return None if now.state in LIVE or now.state == "UNKNOWN" else now.exit_code

    def logs(self, rank: int | None, node: str | None) -> LogView:
        from slurmgen.manage import logs as lg
        from slurmgen.remote.mirror import mirror
        from slurmgen.remote.remote_status import LIVE

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
        )

    def history_dirs(self) -> tuple[list[Path], str]:
        from slurmgen.remote.mirror import mirror

        prefix = f"{self.entry.name}-{self.target.key}"
        mirror(self.transport, str(self.entry.log_dir), prefix, self.copies)
        return [self.copies / prefix], f"job {self.label}: no run history on cluster {self.profile.name} yet"

    def resume(self, say: Say) -> Report:
        """As a job submitted here: requeued while Slurm knows it (through the connection), else its script on
        the cluster submitted again to start from its last saved state (manage.remote_once.resubmit_remote)."""
        import time

        from slurmgen.journal import Journal, find_home, new_token
        from slurmgen.manage.remote_once import resubmit_remote
        from slurmgen.manage.resume import plan_resume

        infos = self.client.show_jobs(self.target.job)
        if infos:
            step = plan_resume(self.target, infos)  # refuses a job that has not ended
            assert step.requeue_target is not None
            self.client.requeue(step.requeue_target)
            return Report(notes=(step.message, f"done; follow it with: slurmgen status {step.requeue_target}"))
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
