"""`-M` on the real test cluster, which names itself (ClusterName in slurm.conf) but has no slurmdbd: Slurm resolves
cluster names through the accounting database, so it refuses every `-M`, its own name included; slurmgen says so
in one line and submits nothing. The rest of a multi-cluster site is tests/cli/test_cli_multi_cluster.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cli_run import slurmgen_argv

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def test_clusters_without_slurmdbd_is_one_line_and_no_job(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    config = dict(re.findall(r"^(\w+)\s+= (.*)$", slurm_cluster.run(["scontrol", "show", "config"], check=True).stdout,
                             re.MULTILINE))  # fmt: skip
    name = config["ClusterName"]
    assert config["AccountingStorageType"] == "accounting_storage/none"
    spec = tmp_path / "job.yaml"
    spec.write_text(f'name: multi-no-dbd\ncommand: ["true"]\ntime: "00:20:00"\nsbatch: {{clusters: {name}}}\n')

    done = slurm_cluster.run(slurmgen_argv("submit", str(spec)), cwd=tmp_path)
    assert done.returncode == 3 and done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert (
        f"{spec}: sbatch.clusters: sbatch: Slurm cannot reach cluster '{name}'" in done.stderr
        and "slurmdbd" in done.stderr
    )
    queue = slurm_cluster.run(["squeue", "--noheader", "--states=all", "--name=multi-no-dbd"], check=True)
    assert queue.stdout == ""  # nothing was submitted
    (journal,) = tmp_path.glob(".slurmgen/journal.jsonl")
    assert [json.loads(line)["event"] for line in journal.read_text().splitlines()] == ["submitting", "failed"]

    # a later command about a job of that cluster is refused the same way, in one line
    done = slurm_cluster.run(slurmgen_argv("status", f"{name}:1"), cwd=tmp_path)
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"scontrol show job: Slurm cannot reach cluster '{name}'" in done.stderr
