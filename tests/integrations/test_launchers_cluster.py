"""`launcher: accelerate` on the real Slurm: the rendered job of data/accelerate_launched.py on 2 nodes x 2
workers (gloo), one `accelerate launch` per node under srun. The four workers join one process group, the node
ranks are the two nodes' (--machine_rank from slurmgen's agent), and a preemption signal sent to the batch shell
(`scancel --batch --signal=USR1`, what `--signal=B:` sends) reaches every worker. The spec names the venv's
python (launched_job.spec_text), which imports slurmgen and accelerate on the nodes."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .integration_helpers import needs
from .launched_job import rank_lines, spec_text

if TYPE_CHECKING:  # annotations only
    from conftest import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.torch]


def logs_of(out: Path, job: str) -> str:
    logs = out / "logs"
    parts = [logs / f"launched-{job}.log", *sorted((logs / f"launched-{job}").glob("*.log"))]
    return "\n".join(p.read_text(errors="replace") for p in parts if p.exists())


def submit(slurm_cluster: SlurmCluster, out: Path, text: str) -> str:
    script = out / "job.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (out / "logs").mkdir()
    return str(slurm_cluster.submit(script))


def test_accelerate_launch_per_node_on_the_cluster(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    needs("accelerate")
    job = submit(slurm_cluster, tmp_path, spec_text(tmp_path, "accelerate", [], args=[], preemption="false"))
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    logs = logs_of(tmp_path, job)
    assert (info.state.name, info.exit_code) == ("COMPLETED", 0), logs[-4000:]
    lines = rank_lines(logs)
    assert [(rank, world, local, node) for rank, world, local, node, *_ in lines] == [
        ("0", "4", "0", "0"), ("1", "4", "1", "0"), ("2", "4", "0", "1"), ("3", "4", "1", "1"),
    ], logs[-4000:]  # fmt: skip
    assert {(total, launched) for _, _, _, _, _, total, launched, _ in lines} == {("10", "yes")}
    assert len({digest for *_, digest in lines}) == 1
    # two nodes, one per-node log each: the agents ran on different nodes
    assert len(list((tmp_path / "logs" / f"launched-{job}").glob("*.log"))) >= 2 + 4


def test_the_preemption_signal_reaches_every_accelerate_worker_on_the_cluster(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    needs("accelerate")
    saved = tmp_path / "saved"
    args = ["--sleep", "200", "--save-on-signal", str(saved)]
    text = spec_text(tmp_path, "accelerate", [], args=args, preemption="{handler: program, lead_time: 120}")
    job = submit(slurm_cluster, tmp_path, text)
    deadline = time.monotonic() + 240
    while len(re.findall(r"rank \d: sleeping at step 0", logs_of(tmp_path, job))) < 4:
        assert time.monotonic() < deadline, logs_of(tmp_path, job)[-4000:]
        time.sleep(0.5)
    result = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert result.returncode == 0, result.stderr
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=300)
    logs = logs_of(tmp_path, job)
    assert (info.state.name, info.exit_code, info.restarts) == ("COMPLETED", 0, 0), logs[-4000:]
    assert sorted(re.findall(r"rank (\d): got SIGUSR1 at step 0", logs)) == ["0", "1", "2", "3"], logs[-4000:]
    assert saved.read_text() == "saved\n"
