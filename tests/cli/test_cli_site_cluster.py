"""`slurmgen doctor` against the real test cluster: what it prints agrees with what the cluster's own
`scontrol show config` and `scontrol -o show partition` say, whatever partitions the cluster has."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import slurmgen_argv

from slurmgen.slurm import site

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def blocks(text: str) -> dict[str, str]:
    """The report's blocks by their first line's first two words (`partition NAME`)."""
    return {" ".join(b.split("\n")[0].split()[:2]): b for b in text.split("\n\n")}


@pytest.mark.slurm_versions()  # doctor names each version and the user-signal spelling that applies to it
def test_doctor_reads_the_real_cluster(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    conf = site.parse_config(slurm_cluster.run(["scontrol", "show", "config"], check=True).stdout)
    parts = site.parse_partitions(slurm_cluster.run(["scontrol", "-o", "show", "partition"], check=True).stdout)
    done = slurm_cluster.run(slurmgen_argv("doctor"), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"Slurm {conf.version}: what preemption and the time limit do to a job here\n")
    assert f"  KillWait     {conf.kill_wait} s from SIGTERM to SIGKILL\n" in done.stdout
    assert f"({site.user_signal_spelling(conf.version)}" in done.stdout
    shown = blocks(done.stdout)
    for part in parts:
        block = shown[f"partition {part.name}"]
        plan = site.site_preemption(conf, part, None)
        assert f"  mode         {plan.mode}" in block
        if site.PREEMPTION in plan.windows:
            assert f"preemption {plan.windows[site.PREEMPTION]:g} s" in block

    spec = tmp_path / "job.yaml"
    spec.write_text('name: doc\ncommand: ["true"]\ntime: "00:10:00"\npreemption: {lead_time: 120}\n')
    done = slurm_cluster.run(slurmgen_argv("doctor", str(spec)), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    default = site.default_partition(parts)
    assert default is not None and f"\n\npartition {default.name} (default)\n" in done.stdout
    assert f"  spec         {spec}: job doc, lead time 120 s (--signal=B:USR1@120), time limit 00:10:00" in done.stdout
    assert "time-limit 120 s (the --signal lead time)" in done.stdout
    assert "  last save    none recorded" in done.stdout
