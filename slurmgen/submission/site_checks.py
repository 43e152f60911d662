"""What a submission asks the site before it sends a job, the same from the login node and over ssh: the limit a
job without `time:` gets on its partition (one note line), and whether the site gives the expedited requeue the
spec asks for (refused in one line where it does not). Each costs one Slurm call, made only when the spec needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmgen.errors import SchedulerError, SchedulerMissing, SlurmgenError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from slurmgen.slurm.client import SlurmClient
    from slurmgen.spec.model import JobSpec


def say_partition_time(spec: JobSpec, client: SlurmClient, warn: Callable[[str], object]) -> None:
    """A spec without `time:`: the limit the partition gives the job (its DefaultTime, else its MaxTime), one
    line; one `scontrol show partition`, and a line saying so when Slurm does not answer."""
    from slurmgen.slurm.partition_time import time_left_out
    from slurmgen.slurm.site_config import default_partition, parse_partitions

    if spec.time is not None:
        return
    name = spec.partition.split(",")[0] if spec.partition else None
    try:
        partitions = parse_partitions(client.show_partitions(name))
    except SlurmgenError as exc:
        warn(f"note: time left out: cannot read the partition's DefaultTime and MaxTime ({exc})")
        return
    warn("note: " + time_left_out(partitions[0] if name and partitions else default_partition(partitions)))


def check_expedite(spec: JobSpec, source: str, client: SlurmClient) -> None:
    """Refuse, before anything is written, a job asking for an expedited requeue the site does not give; a site
    that cannot be asked lets it go (sbatch or slurmctld then say why)."""
    from slurmgen.slurm.expedite import expedite_refusal
    from slurmgen.slurm.site_config import parse_config

    if not spec.recovery.expedite:
        return
    try:
        site = parse_config(client.show_config())
    except (SchedulerError, SchedulerMissing):
        return
    if (refusal := expedite_refusal(site, source)) is not None:
        raise UsageError(refusal)
