"""A spec without `time:` on a real Slurm: `doctor` and `submit` say the limit the partition gives the job, and the
job gets that limit. The shared clusters' partitions have neither DefaultTime nor MaxTime (every version); a
separate 22.05 instance (tests/cluster/up.sh --instance 4 with SLURMGEN_CLUSTER_EXTRA_CONF) adds `timed`
(DefaultTime 30 min, MaxTime 2 h) and `capped` (MaxTime 1 h alone), so the shared clusters keep their partitions."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import run_slurmgen, slurmgen_argv
from cluster_instance import instance_with

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

INSTANCE = "4"
SELECT = ["--slurm", "22.05", "--instance", INSTANCE]
PARTITIONS = (
    "PartitionName=timed Nodes=node[1-3] DefaultTime=00:30:00 MaxTime=02:00:00 State=UP PreemptMode=OFF\n"
    "PartitionName=capped Nodes=node[1-3] MaxTime=01:00:00 State=UP PreemptMode=OFF"
)
PY = sys.executable


def spec(tmp: Path, partition: str | None) -> Path:
    path = tmp / f"job-{partition or 'default'}.yaml"
    part = f"partition: {partition}\n" if partition else ""
    path.write_text(f"name: untimed\ncommand: [sleep, '300']\npython: {PY}\npreemption: false\n{part}")
    return path


@pytest.mark.slurm_versions()
def test_doctor_says_a_partition_without_either_limit_may_run_the_job_unlimited(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    done = slurm_cluster.run(slurmgen_argv("doctor", str(spec(tmp_path, None))), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    assert "time limit left out (the partition's, below)" in done.stdout
    assert (
        "  time         partition debug has neither DefaultTime nor MaxTime: the job may run unlimited" in done.stdout
    )


@pytest.fixture(scope="module")
def timed_cluster() -> Iterator[dict[str, str]]:
    """The environment of a CLI that talks to the 22.05 instance with the `timed` and `capped` partitions."""
    with instance_with("22.05", INSTANCE, PARTITIONS) as client_env:
        shown = subprocess.run(["scontrol", "-o", "show", "partition", "timed"], capture_output=True, text=True,
                                env=client_env)  # fmt: skip
        assert "DefaultTime=00:30:00" in shown.stdout, f"instance {INSTANCE} was started differently: {shown}"
        yield client_env


@pytest.mark.parametrize(
    ("partition", "said", "limit"),
    [
        ("timed", "partition timed gives the job its DefaultTime 00:30:00 (its MaxTime is 02:00:00)", "00:30:00"),
        ("capped", "partition capped has no DefaultTime, so the job gets its MaxTime 01:00:00", "01:00:00"),
    ],
)
def test_doctor_and_submit_say_the_limit_the_partition_gives_and_the_job_gets_it(
    timed_cluster: dict[str, str], tmp_path: Path, partition: str, said: str, limit: str
) -> None:
    path = spec(tmp_path, partition)
    doctor = run_slurmgen("doctor", str(path), cwd=tmp_path, env=timed_cluster, timeout=60)
    assert doctor.returncode == 0, doctor.stderr
    assert f"  time         {said}\n" in doctor.stdout, doctor.stdout
    submit = run_slurmgen("submit", str(path), cwd=tmp_path, env=timed_cluster, timeout=60)
    assert submit.returncode == 0, submit.stderr
    job = submit.stdout.strip()
    try:
        assert f"note: time left out: {said}\n" in submit.stderr, submit.stderr
        shown = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True,
                               env=timed_cluster)  # fmt: skip
        found = re.search(r"\bTimeLimit=(\S+)", shown.stdout)
        assert found is not None and found[1] == limit, shown.stdout
    finally:
        subprocess.run(["scancel", job], capture_output=True, env=timed_cluster, check=False)
