"""One Peers object per training process, shared by Preemption and its checkpoint store: real processes, a real
gloo process group, groups counted in torch.distributed's own registry, a real SIGKILL of a peer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slurmgen import exit_codes

from .runtime_helpers import base_env, free_port

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# Every path that talks to the other ranks, several times over: the resume choice (plain and sharded), the stop
# agreement, plain and sharded saves (one in the background). Then the groups torch knows of, beyond the world.
EVERY_PATH = """
import os, sys, torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
from slurmgen.runtime import Preemption

pre = Preemption(path=os.path.join(out, "x.state"))
state = {"w": torch.zeros(4)}
pre.load(into=state)
for step in range(3):
    assert not pre.should_stop()
    pre.save({"w": torch.full((4,), float(step))}, sharded=False)
    pre.save({"w": torch.full((4,), float(step))}, sharded=True)
pre.save({"w": torch.full((4,), 9.0)}, sharded=True, async_=True)
pre.wait_for_save()
assert not pre.should_stop()
assert pre.load(into=state) is True and float(state["w"][0]) == 9.0
print("GROUPS", len(c10d._world.pg_map) - 1, flush=True)
pre.peers.close()
print("AFTER CLOSE", len(c10d._world.pg_map) - 1, flush=True)
dist.destroy_process_group()
"""

# Every rank checks for a stop at every step; rank `victim` SIGKILLs itself at step 5, with a background save of
# a sharded state in flight on every rank, so the stop agreement and the save's thread can both find the loss.
PEER_KILLED = """
import os, signal, sys, torch
import torch.distributed as dist

rank, world, port, out, victim = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
from slurmgen.runtime import Preemption

pre = Preemption(path=os.path.join(out, "x.state"))
for step in range(1000):
    if step == 5 and rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    pre.should_stop()
    if step % 2 == 0:
        pre.save({"w": torch.full((1 << 16,), float(step))}, sharded=True, async_=True)
print("NOT REACHED", flush=True)
"""

LINE = "lost the other ranks"


def _ranks(program: str, world: int, *args: str) -> list[tuple[int, str, str]]:
    port = str(free_port())
    code = textwrap.dedent(program)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(rank), str(world), port, *args],
            env=base_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        results.append((proc.returncode, out, err))
    return results


def test_preemption_and_its_store_talk_over_one_side_group_and_one_save_group(tmp_path: Path) -> None:
    """Whatever the number of agreements, loads and saves: two groups in all, made once and destroyed once (the
    side group, and the save group that a background save's thread may use at the same time)."""
    for code, out, err in _ranks(EVERY_PATH, 2, str(tmp_path)):
        assert code == 0, err[-3000:]
        assert "GROUPS 2\n" in out, out + err[-2000:]
        assert "AFTER CLOSE 0\n" in out, out


def test_a_killed_peer_gives_one_peer_loss_line_on_every_other_rank(tmp_path: Path) -> None:
    victim = 1
    results = _ranks(PEER_KILLED, 3, str(tmp_path), str(victim))
    assert results[victim][0] == -9
    for rank in (0, 2):
        code, out, err = results[rank]
        assert code == exit_codes.EXIT_PEER_LOST, err[-3000:]
        assert "NOT REACHED" not in out
        assert err.count(LINE) == 1, err[-3000:]
        line = next(line for line in err.splitlines() if LINE in line)
        assert line.startswith(f"slurmgen: rank {rank}: lost the other ranks "), line
        assert line.endswith("a peer rank died or stopped answering; exiting"), line
