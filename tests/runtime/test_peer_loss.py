"""A rank that loses its peers leaves with one line and exit code 76, from whichever thread finds the loss
first: real gloo process groups, real processes, real tracebacks through torch's own excepthook."""

from __future__ import annotations

import sys
import textwrap

import pytest
from ranks import Launcher, Ranks

from slurmgen import exit_codes

from .runtime_helpers import base_env, free_port

pytestmark = [pytest.mark.torch, pytest.mark.slow]

# torch's excepthook (installed by init_process_group) points sys.stderr at a StringIO while it formats the
# traceback. The exception's __str__ runs inside that window: it lets a second thread leave meanwhile, as a
# background save's thread does when the main thread's collective fails at the same moment.
LEAVE_WHILE_TORCH_PRINTS = """
import os, sys, threading, time
import torch.distributed as dist
from slurmgen.runtime.peer_loss import install_peer_loss_hook, leave

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
install_peer_loss_hook(os._exit)
formatting = threading.Event()

class Lost(RuntimeError):
    def __str__(self):
        formatting.set()
        time.sleep(0.5)  # wide enough for the other thread to get to its exit
        return "the main thread's error"

def save_thread():
    formatting.wait()
    leave("slurmgen: rank 0: lost the other ranks during a sharded save; exiting", os._exit)

threading.Thread(target=save_thread).start()
raise Lost()
"""

# Rank 1 leaves right after the group is made; rank 0's functional collective (what DTensor and FSDP2 wait on)
# then fails, uncaught, on the main thread.
FUNCTIONAL_COLLECTIVE_FAILS = """
import os, sys, torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from slurmgen.runtime.peer_loss import install_peer_loss_hook

rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=rank, world_size=2)
install_peer_loss_hook(os._exit)
dist.barrier()
if rank == 1:
    os._exit(0)
funcol.all_reduce(torch.ones(4), "sum", dist.group.WORLD).wait()
for _ in range(50):
    funcol.all_reduce(torch.ones(4), "sum", dist.group.WORLD).wait()
print("NOT REACHED", flush=True)
"""


def _python(ranks: Ranks, program: str, port: int, *args: str) -> None:
    code = textwrap.dedent(program).replace("{port}", str(port))
    ranks.start([sys.executable, "-c", code, *args], base_env())


def test_a_thread_leaving_while_torch_prints_a_traceback_keeps_both(launcher: Launcher) -> None:
    ranks = launcher.new()
    _python(ranks, LEAVE_WHILE_TORCH_PRINTS, free_port())
    [proc] = ranks.results(120)
    err = proc.stderr
    assert proc.returncode == exit_codes.EXIT_PEER_LOST, err
    # The traceback came out whole (through torch's rank prefix), and the one line after it.
    assert "[rank0]: __main__.Lost: the main thread's error" in err or "[rank0]: Lost: the main thread's error" in err
    line = "slurmgen: rank 0: lost the other ranks during a sharded save; exiting"
    assert err.rstrip().endswith(line), err
    assert err.count(line) == 1


def test_a_failed_functional_collective_leaves_with_the_peer_loss_line(launcher: Launcher) -> None:
    port, ranks = free_port(), launcher.new()
    for rank in range(2):
        _python(ranks, FUNCTIONAL_COLLECTIVE_FAILS, port, str(rank))
    results = ranks.results(120)
    assert results[1].returncode == 0, results[1].stderr
    out, err = results[0].stdout, results[0].stderr
    assert results[0].returncode == exit_codes.EXIT_PEER_LOST, err
    assert "NOT REACHED" not in out
    assert "_functional_collectives.py" in err  # the error came out of the functional layer
    assert "a peer rank died or stopped answering; exiting" in err.splitlines()[-1]
