"""The rendezvous store once listened on every interface (IPv4 and IPv6 wildcards) at a port
derivable from the job id, and torch's store has no authentication. Read from /proc/net/tcp* by rank 0 of a
real local job while it runs: the store's port is bound to the job's chosen address only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

pytestmark = [pytest.mark.torch, pytest.mark.slow]

PROGRAM = """\
import json, os
import torch.distributed as dist
from slurmgen.runtime import init_distributed

init_distributed("gloo")
port = int(os.environ["MASTER_PORT"])
if dist.get_rank() == 0:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.append(local.rsplit(":", 1)[0])
    with open("listeners.json", "w") as out:
        json.dump(found, out)
dist.barrier()
dist.destroy_process_group()
"""

WILDCARDS = {"00000000", "0" * 32}  # 0.0.0.0 and :: as /proc/net/tcp and tcp6 write them


def test_the_store_listens_on_the_chosen_address_not_the_wildcard(tmp_path: Path, torch_module: object) -> None:
    (tmp_path / "store.py").write_text(PROGRAM)
    (tmp_path / "job.yaml").write_text(
        f"name: store\ncommand: [{sys.executable}, store.py]\ntime: '00:05:00'\ntasks_per_node: 2\npreemption: false\n"
    )
    done = run_slurmgen("run", "job.yaml", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    listeners = json.loads((tmp_path / "listeners.json").read_text())
    assert listeners and not WILDCARDS & set(listeners), listeners  # was: ["0000...0000"] (tcp6 ::)
    assert listeners == ["0100007F"]  # 127.0.0.1, the address of the local run's one node
