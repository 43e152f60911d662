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


def test_expedite_where_the_cluster_has_none(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """recovery.expedite on the primary cluster (22.05, no expedited requeue; AuthInfo=cred_expire=5): doctor
    says the requeue delay and the one risk line; submit refuses in one line and writes nothing; the cluster's
    own sbatch rejects the option (what the check spares the user)."""
    conf = site.parse_config(slurm_cluster.run(["scontrol", "show", "config"], check=True).stdout)
    spec = tmp_path / "job.yaml"
    spec.write_text('name: fast\ncommand: ["true"]\ntime: "00:20:00"\nrecovery: {expedite: true}\n')
    done = slurm_cluster.run(slurmgen_argv("doctor", str(spec)), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert (f"  requeue      a requeued run may start {conf.requeue_delay} s after the requeue "
            f"({conf.requeue_delay_from}); expedited requeue not allowed here\n") in done.stdout  # fmt: skip
    risks = [line for line in done.stdout.splitlines() if line.startswith("  risk") and "recovery.expedite" in line]
    assert len(risks) == 1 and f"Slurm {conf.version} has no expedited requeue" in risks[0]

    done = slurm_cluster.run(slurmgen_argv("submit", str(spec)), cwd=tmp_path)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {spec}: recovery.expedite: Slurm {conf.version} has no expedited requeue")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]  # no run directory, no log directory

    raw = slurm_cluster.run(["sbatch", "--requeue=expedite", "-o", "/dev/null", "--wrap", "true"], cwd=tmp_path)
    assert raw.returncode != 0 and "requeue" in raw.stderr
