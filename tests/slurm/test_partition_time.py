"""What a job without `time:` gets on its partition (slurmgen/slurm/partition_time.py), from recorded `scontrol -o
show partition`: every version's shared test cluster (no DefaultTime, MaxTime UNLIMITED) and a 22.05 instance with
a partition that has both and one that has only a MaxTime (tests/data/slurm/README.md)."""

from __future__ import annotations

import pytest
from recorded import TESTS

from slurmgen.slurm.partition_time import time_left_out
from slurmgen.slurm.site_config import default_partition, parse_partitions

SLURM_DATA = TESTS / "data" / "slurm"
VERSIONS = sorted(d.name for d in SLURM_DATA.glob("*/") if (d / "show-partition-o.out").is_file())


def test_the_recordings_cover_every_version() -> None:
    assert VERSIONS == ["22.05", "24.11", "25.11", "26.05"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partition_with_neither_limit_says_the_job_may_run_unlimited(version: str) -> None:
    parts = parse_partitions((SLURM_DATA / version / "show-partition-o.out").read_text())
    debug = default_partition(parts)
    assert debug is not None and (debug.name, debug.default_time, debug.max_time) == ("debug", None, None)
    assert time_left_out(debug) == (
        "time left out: partition debug has neither DefaultTime nor MaxTime: the job may run unlimited, or be held "
        "pending where a QOS or association limit wants a time; set time: to bound it"
    )


def test_default_time_first_else_max_time() -> None:
    parts = {p.name: p for p in parse_partitions((SLURM_DATA / "partition-times-22.05.out").read_text())}
    assert (parts["timed"].default_time, parts["timed"].max_time) == (1800, 7200)
    assert (parts["capped"].default_time, parts["capped"].max_time) == (None, 3600)
    assert time_left_out(parts["timed"]) == (
        "time left out: partition timed gives the job its DefaultTime 00:30:00 (its MaxTime is 02:00:00)"
    )
    assert time_left_out(parts["capped"]) == (
        "time left out: partition capped has no DefaultTime, so the job gets its MaxTime 01:00:00"
    )


def test_no_partition_at_all_is_one_line_too() -> None:
    assert time_left_out(None).startswith("time left out: the spec names no partition and the cluster has no default")


@pytest.mark.parametrize(("printed", "seconds"), [("NONE", None), ("UNLIMITED", None), ("1-00:00:00", 86400),
                                                  ("(null)", None), ("soon", None)])  # fmt: skip
def test_a_limit_slurmgen_cannot_read_is_no_limit_claimed(printed: str, seconds: int | None) -> None:
    line = f"PartitionName=p Default=YES DefaultTime={printed} MaxTime={printed} PreemptMode=OFF GraceTime=0"
    (part,) = parse_partitions(line)
    assert (part.default_time, part.max_time) == (seconds, seconds)
