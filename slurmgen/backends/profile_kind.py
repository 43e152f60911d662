"""Which kind of job a cluster profile means: a profile with a `host` is Slurm over ssh, any other (or none) Slurm
on this machine. The one place that tells them apart, for a submission (by `--cluster NAME`) and for a job of the
journal (by the profile its entry names); the registry and the ssh kind's own status of recent jobs ask it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slurmgen.journal import Entry
    from slurmgen.spec.profile import ClusterProfile


def kind_of(profile: ClusterProfile | None) -> str:
    """The registry's key of the kind a submission with this profile goes to: `ssh` or `slurm`."""
    return "ssh" if profile is not None and profile.host is not None else "slurm"


def profile_of(entry: Entry | None) -> ClusterProfile | None:
    """The cluster profile a journal entry was submitted through (`submit --cluster NAME`: its `profile`; the
    entry's `cluster` is Slurm's own cluster name of a federation); None for a job submitted without one."""
    from slurmgen.spec.profile import find_profile

    name = None if entry is None else entry.extra.get("profile")
    if entry is None or not isinstance(name, str):
        return None
    return find_profile(name, Path(entry.spec).parent)
