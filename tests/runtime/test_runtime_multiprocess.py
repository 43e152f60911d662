"""Real rank processes on loopback with gloo: init, all_reduce, missing ranks, a port already taken."""

from __future__ import annotations

import socket
import sys

import pytest

from slurmgen import contract

from .runtime_helpers import ROOT, WORKER, RankProcs, base_env, free_low_port, free_port, srun_env

pytestmark = [
    pytest.mark.torch,
    pytest.mark.slow,
]
WORLD = 4
# Short barrier timeout, long process-group timeout: a test that finishes near the barrier timeout proves the
# barrier did its job; one that hangs toward the process-group timeout is killed by wait_all.
FAST = {contract.BARRIER_TIMEOUT: "6", contract.PG_TIMEOUT: "300"}


def port_env() -> dict[str, str]:
    return {contract.PORT: str(free_low_port()), contract.PORT_RANGE: "1"}


def test_srun_style_four_ranks(ranks: RankProcs) -> None:
    ports = port_env()
    for rank in range(WORLD):
        ranks.worker("init", srun_env(rank, WORLD, job_id=4242, **ports, **FAST))
    results = [r.json() for r in ranks.wait_all(120)]
    assert sorted(r["rank"] for r in results) == list(range(WORLD))
    assert {r["sum"] for r in results} == {10.0}
    assert {(r["addr"], r["port"], r["iface"]) for r in results} == {("localhost", int(ports[contract.PORT]), "lo")}
    assert {r["local_world"] for r in results} == {WORLD}
    assert {(r["gloo"], r["nccl"]) for r in results} == {("lo", "=lo")}


def test_torchrun_style_variables_win_over_slurms(ranks: RankProcs) -> None:
    port = str(free_port())
    for rank in range(WORLD):
        # As torchrun gives its workers inside a one-task-per-node srun step (SLURM_PROCID 0 of 1).
        env = srun_env(
            0,
            1,
            job_id=4243,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(WORLD),
            LOCAL_WORLD_SIZE=str(WORLD),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            **FAST,
        )
        ranks.worker("init", env)
    results = [r.json() for r in ranks.wait_all(120)]
    assert sorted(r["rank"] for r in results) == list(range(WORLD))
    assert {r["sum"] for r in results} == {10.0}
    assert {(r["addr"], r["port"]) for r in results} == {("127.0.0.1", int(port))}


def test_real_torchrun_agent_store(ranks: RankProcs) -> None:
    """torchrun's workers connect to the agent's store (TORCHELASTIC_USE_AGENT_STORE): no server of ours."""
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        str(WORKER),
        "init",
    ]
    ranks.start(argv, base_env(**FAST))
    (result,) = ranks.wait_all(180)
    assert result.returncode == 0, result.stderr[-3000:]
    # Both workers share torchrun's stdout, so their lines may interleave: count, don't parse.
    assert result.stdout.count('"sum": 3.0') == 2
    assert result.stdout.count('"iface": "lo"') == 2


def test_unmodified_env_script_through_the_entry_point(ranks: RankProcs) -> None:
    ports = port_env()
    for rank in range(WORLD):
        argv = [sys.executable, "-m", "slurmgen.task", "--", sys.executable, str(WORKER), "raw"]
        ranks.start(argv, srun_env(rank, WORLD, job_id=4244, **ports))
    results = [r.json() for r in ranks.wait_all(120)]
    assert sorted(r["rank"] for r in results) == list(range(WORLD))
    assert {r["sum"] for r in results} == {10.0}


def test_a_rank_that_never_arrives_fails_the_others_within_the_barrier_timeout(ranks: RankProcs) -> None:
    ports = port_env()
    for rank in range(WORLD - 1):  # rank 3 never starts
        ranks.worker("init", srun_env(rank, WORLD, job_id=4245, **ports, **FAST))
    results = ranks.wait_all(90)
    for result in results:
        out = result.json()
        assert result.returncode == 3
        assert out["error"] == "BarrierTimeout"
        message = str(out["message"])
        assert "1 of 4 ranks never arrived: 3" in message
        assert f"MASTER_ADDR:MASTER_PORT=localhost:{ports[contract.PORT]}" in message
        assert "interface lo" in message
        assert "Likely causes" in message
        assert float(str(out["elapsed"])) < 6 + 15  # the barrier timeout (+ startup on a busy machine)


def test_missing_rank_zero_fails_the_others_fast(ranks: RankProcs) -> None:
    """No store within the 6 s barrier timeout: one clear error then, not torch's client retrying after random
    delays (which took 12-20 s and printed a C++ trace per try)."""
    ports = port_env()
    for rank in range(1, WORLD):
        ranks.worker("init", srun_env(rank, WORLD, job_id=4246, **ports, **FAST))
    for result in ranks.wait_all(90):
        out = result.json()
        assert out["error"] == "RuntimeSetupError"
        assert f"could not reach the store at localhost:{ports[contract.PORT]}" in str(out["message"])
        assert "rank 0 has not started or died" in str(out["message"])
        assert 6 <= float(str(out["elapsed"])) < 6 + 12  # the retries alone took 6 s or more; slack for a busy machine
        assert "TCPStore.cpp" not in result.stderr


def test_late_rank_at_barrier_is_named(ranks: RankProcs) -> None:
    ports = port_env()
    for rank in range(WORLD):
        env = srun_env(rank, WORLD, job_id=4247, **ports, **{**FAST, contract.BARRIER_TIMEOUT: "4"})
        ranks.worker("late-barrier", {**env, "SGT_LATE_SLEEP": "12"})
    results = [r.json() for r in ranks.wait_all(120)]
    waiting = [r for r in results if r["rank"] != WORLD - 1]
    assert all(r["barrier"] == "timeout" and r["missing"] == [3] for r in waiting)
    assert all(3.5 < float(str(r["elapsed"])) < 4 + 12 for r in waiting)
    assert all("barrier 'checkpoint' timed out after 4s" in str(r["message"]) for r in waiting)


@pytest.mark.parametrize("explicit", [True, False])
def test_port_already_bound_gives_the_clear_message(ranks: RankProcs, explicit: bool) -> None:
    with socket.socket() as taken:
        taken.bind(("", 0 if explicit else free_low_port()))
        taken.listen()
        port = taken.getsockname()[1]
        extra = {"MASTER_PORT": str(port)} if explicit else {contract.PORT: str(port), contract.PORT_RANGE: "1"}
        ranks.worker("init", srun_env(0, 1, job_id=4248, **extra, **FAST))
        (result,) = ranks.wait_all(60)
    out = result.json()
    assert out["error"] == "RuntimeSetupError"
    message = str(out["message"])
    assert f"port {port} " in message
    assert "already in use" in message
    assert "distributed.port / distributed.port_range in the job spec" in message


@pytest.mark.parametrize(
    ("sizes", "names", "shape"),
    [({}, ["dp"], [4]), ({"dp_shard": 2, "tp": 2}, ["dp_shard", "tp"], [2, 2]), ({"pp": 4}, ["pp"], [4])],
)
def test_named_device_mesh_and_ddp(ranks: RankProcs, sizes: dict[str, int], names: list[str], shape: list[int]) -> None:
    import json

    ports = port_env()
    for rank in range(WORLD):
        ranks.worker("mesh", srun_env(rank, WORLD, job_id=4249, **ports, **FAST), json.dumps(sizes))
    for out in (r.json() for r in ranks.wait_all(120)):
        assert (out["mesh_names"], out["mesh_shape"]) == (names, shape)
        assert out["ddp_ok"] is True


def test_worker_script_is_where_the_tests_expect_it() -> None:
    assert WORKER.is_file()
    assert WORKER.parent.parent.parent == ROOT
