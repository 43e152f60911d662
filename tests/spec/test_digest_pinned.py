"""The spec digest is SLURMGEN_SPEC_HASH of running jobs: a resumed job compares it with the one its checkpoints
were saved under. These values were taken before the model was generated from the field table; any change to how
the model is built must leave them, and the resolved spec behind them, exactly as they are."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from slurmgen.spec.load import load_file, load_text

JOBS = Path(__file__).resolve().parents[2] / "jobs"

RICH = """\
name: rich
command: "python3 train.py --lr 0.1"
time: "1-02:03"
nodes: 2
gpus_per_node: 4
cpus_per_task: 8
mem: 64gb
partition: gpu
account: acct
qos: high
constraint: a100
env: {B: "2", A: 1}
setup: ["module load cuda", "echo hi"]
container: {image: "img:1", mounts: ["/a:/b:ro"], workdir: /w, name: c1, mount_home: false, writable: true}
trackers: {wandb: false}
preemption: {signal: SIGHUP, lead_time: 120, max_requeues: 3, max_preemptions: 7, keep: 2, requeue_on_failure: true,
  state_dir: /s}
recovery: {max_restarts: 2, hang_timeout: 600, spare_nodes: 1, health_check: "nvidia-smi -L"}
distributed: {port: 30000, port_range: 100, timeout: 60, barrier_timeout: 30}
chdir: /work
dependency: singleton
sbatch: {exclusive: true, mail-type: END, comment: 5}
"""

PLAIN = """\
name: plain
command: [python3, t.py]
time: "10"
launcher: torchrun
nodes: 3
nproc_per_node: 2
preemption: false
recovery: false
"""

# sha256 of the canonical JSON of to_dict(); the digest is its first 12 hex digits.
PINNED = {
    "container.yaml": "c3c22a3ffd13ffe52bd479abb7dc285f5e6845eb27091c79aa12160ba87d8f2e",
    "cpu-debug.yaml": "fb939f64d253f637e1810daf5aaf738c5a3c484336db1db45368ca4b4c9853a4",
    "gpu-1node-8gpu.yaml": "ab289305a7cf9cbcd2942d2310ec6c884d2464bf5ac16b82380a2acd4d0896fe",
    "gpu-2node-torchrun.yaml": "3fab120b9a4cf97816543ce45f7b46977611c2b45bbf2dcfbd8f415aae681cb9",
    "long-preemptible.yaml": "959b26dc88c4cb8044c68b5c197b0d01f038bdad6ff85bfdc83fd40ba6464f46",
    "sweep-lr.yaml": "50327a7ced5903307902663b198095c898a03941311310fb32baf3af43f723a8",
    "rich": "2f39767110a408e688a0fe7a6fa1136818751f2641526ab80e427c8178efa96e",
    "plain": "6e6a9c99a8482d2356b385c3b39a38b794fccee66fab504d0ca43173a5ab8424",
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_digest_and_resolved_spec_stay_as_pinned(name: str) -> None:
    if name in ("rich", "plain"):
        spec = load_text(RICH if name == "rich" else PLAIN, f"{name}.yaml").spec
    else:
        spec = load_file(JOBS / name).spec
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    full = hashlib.sha256(canonical.encode()).hexdigest()
    assert full == PINNED[name]
    assert spec.digest == full[:12]
