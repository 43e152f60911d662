"""The time limit a job that says none gets on its partition, in one line for `doctor` and `submit`.

slurm.conf(5), DefaultTime: "Run time limit used for jobs that don't specify a value. If not set then MaxTime will
be used." MaxTime UNLIMITED (the default) and no DefaultTime leave such a job without a limit, unless a QOS or an
association sets one (sacctmgr(1) MaxWall; with AccountingStorageEnforce=limits, Slurm holds a job pending whose
limit would pass it). Pure and standard-library only.
"""

from __future__ import annotations

from slurmgen.slurm.site_config import PartitionInfo
from slurmgen.slurm.times import format_duration


def time_left_out(partition: PartitionInfo | None) -> str:
    """What a job without `time:` gets on ``partition`` (None: the spec names none and the cluster has no default
    partition), as the line `doctor` and `submit` print."""
    if partition is None:
        return (
            "time left out: the spec names no partition and the cluster has no default one, so Slurm picks the "
            "limit; set time: or partition:"
        )
    name = f"partition {partition.name}"
    if partition.default_time is not None:
        most = format_duration(partition.max_time)
        return (
            f"time left out: {name} gives the job its DefaultTime {format_duration(partition.default_time)} "
            f"(its MaxTime is {most})"
        )
    if partition.max_time is not None:
        most = format_duration(partition.max_time)
        return f"time left out: {name} has no DefaultTime, so the job gets its MaxTime {most}"
    return (
        f"time left out: {name} has neither DefaultTime nor MaxTime: the job may run unlimited, or be held pending "
        "where a QOS or association limit wants a time; set time: to bound it"
    )
