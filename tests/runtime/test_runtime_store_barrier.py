"""The store barrier with threads as ranks on one in-memory store: pass, verdict, different reasons."""

from __future__ import annotations

import threading
import time

import pytest

from slurmgen.runtime.store_barrier import BarrierTimeout, StoreBarrier

pytestmark = [
    pytest.mark.torch,
]


def run_ranks(
    world: int, present: list[int], timeout: float, reasons: dict[int, str] | None = None, rounds: int = 1
) -> dict[int, object]:
    from torch._C._distributed_c10d import HashStore

    store = HashStore()
    outcome: dict[int, object] = {}

    def rank_main(rank: int) -> None:
        barrier = StoreBarrier(store, "t/", rank, world, f"host h{rank}")
        try:
            for _ in range(rounds):
                barrier.wait(timeout, (reasons or {}).get(rank, "sync"))
            outcome[rank] = "passed"
        except BarrierTimeout as err:
            outcome[rank] = err

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in present]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout + 10)
    return outcome


def test_all_present_pass_repeatedly_and_old_keys_are_deleted() -> None:
    from torch._C._distributed_c10d import HashStore

    outcome = run_ranks(3, [0, 1, 2], 5, rounds=4)
    assert outcome == {0: "passed", 1: "passed", 2: "passed"}
    store = HashStore()
    barrier = StoreBarrier(store, "k/", 0, 1, "me")
    for _ in range(3):
        barrier.wait(1, "x")
    assert store.num_keys() == 3  # only the last generation's rank, count and done keys remain


def test_missing_rank_gets_a_verdict_from_rank_zero() -> None:
    started = time.monotonic()
    outcome = run_ranks(4, [0, 1, 2], 1.0)
    assert time.monotonic() - started < 1.0 + 8  # the 1 s timeout, not a hang; slack for a busy machine
    for rank in (0, 1, 2):
        error = outcome[rank]
        assert isinstance(error, BarrierTimeout)
        assert error.missing == [3]
        assert f"on rank {rank} of 4 (host h{rank})" in str(error)
        assert "1 of 4 ranks never arrived: 3" in str(error)


def test_a_rank_at_another_barrier_is_shown() -> None:
    outcome = run_ranks(3, [0, 1], 1.0, reasons={1: "save"})
    error = outcome[0]
    assert isinstance(error, BarrierTimeout)
    assert "rank 1 is at 'save' (host h1)" in str(error)


def test_without_rank_zero_the_others_diagnose_themselves() -> None:
    outcome = run_ranks(3, [1, 2], 1.0)
    for rank in (1, 2):
        error = outcome[rank]
        assert isinstance(error, BarrierTimeout)
        assert error.missing == [0]


def test_a_large_job_without_rank_zero_asks_the_store_a_bounded_number_of_times() -> None:
    """Above SURVEY_ALONE ranks, the ranks that get no verdict from rank 0 do not each survey every rank (N^2
    requests to one store while the job is failing: 2.7 x 10^8 at 16,384 ranks, bench/store_scale.py); they read
    the count and rank 0's key and point at rank 0."""
    from torch._C._distributed_c10d import HashStore

    from slurmgen.runtime.store_barrier import SURVEY_ALONE

    world = SURVEY_ALONE + 36
    store, asked, lock = HashStore(), [0], threading.Lock()

    class Counting:
        def __getattr__(self, name: str) -> object:
            method = getattr(store, name)

            def counted(*args: object) -> object:
                with lock:
                    asked[0] += 1
                return method(*args)

            return counted

    errors: dict[int, BarrierTimeout] = {}

    def rank_main(rank: int) -> None:
        try:
            StoreBarrier(Counting(), "t/", rank, world, f"host h{rank}").wait(1.0, "sync")
        except BarrierTimeout as err:
            errors[rank] = err

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(1, world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(errors) == list(range(1, world))
    assert all(e.missing == [0] for e in errors.values())
    assert f"{world - 1} of {world} ranks arrived; rank 0 never arrived: see its log first" in str(errors[5])
    assert asked[0] <= 8 * world  # four to arrive and wait, two to diagnose, per rank; a survey each would be ~2N
