"""The rank that failed among its casualties (interruption/casualty.py), as tables: which failed task is the cause,
and what of an error line the repeated-failure rule compares."""

from __future__ import annotations

import pytest

from slurmgen.interruption.casualty import TaskEnd, cause_of, error_key

# (rank, exit code, signal, time)
CAUSES = [
    # A bug on rank 0: rank 1 sees the closed connection and exits 76 first; rank 0 is the cause.
    ([(1, 76, None, 10.0), (0, 1, None, 10.2)], 0),
    # The same with 16 ranks, all casualties but one.
    ([(r, 76, None, 10.0 + r / 100) for r in range(1, 16)] + [(0, 1, None, 11.0)], 0),
    # A rank killed (SIGKILL, first): its node-mate dies of the step's TERM after it: the killed rank.
    ([(1, 137, "KILL", 10.0), (0, 143, "TERM", 10.5)], 1),
    # The step's signal before any other failure is no casualty's: the earliest stands.
    ([(0, 143, "TERM", 10.0)], 0),
    # Two ranks fail on their own: the earliest of them.
    ([(2, 1, None, 10.3), (3, 1, None, 10.1), (1, 76, None, 10.0)], 3),
    # Only casualties (the cause left no record): the earliest casualty.
    ([(2, 76, None, 10.3), (1, 76, None, 10.1)], 1),
    ([], None),
]
# (rank, exit code, signal, time, raised_at): a rank that raised, then took seconds to exit (an atexit hook), is
# killed by the step's TERM after its peers exited 76: it is the cause, by when it raised.
RAISED = [
    ([(0, 76, None, 10.5, None), (1, 1, None, 13.6, 10.1)], 1),
    ([(0, 76, None, 10.5, None), (2, 76, None, 10.6, None), (1, 1, None, 14.0, 10.2)], 1),
    # a rank that raised in a collective (it lost its peers) and exited 76 stays a casualty
    ([(0, 76, None, 10.5, 10.4), (1, 1, None, 13.6, 10.1)], 1),
    # a peer that raised gloo's "Connection reset by peer" in its own all_reduce (exit 1, not 76) is recorded first
    # while the failing rank lingers in its atexit hooks: the earlier raise is the cause (the scenario engine's
    # crash_late of rank 1, tests/scenarios/test_corpus.py)
    ([(0, 1, None, 10.5, 10.45), (1, 1, None, 13.6, 10.1)], 1),
    # without the record (a program the hook does not reach) the earliest casualty, as before
    ([(0, 76, None, 10.5, None), (1, 143, "TERM", 13.6, None)], 0),
]


@pytest.mark.parametrize(("ends", "cause"), CAUSES)
def test_the_cause_is_the_rank_that_failed_on_its_own(ends: list[tuple[int, int, str | None, float]],
                                                      cause: int | None) -> None:  # fmt: skip
    found = cause_of([TaskEnd(*end) for end in ends])
    assert (found.rank if found else None) == cause


@pytest.mark.parametrize(("ends", "cause"), RAISED)
def test_a_rank_that_raised_is_the_cause_even_when_it_exits_after_its_casualties(
    ends: list[tuple[int, int, str | None, float, float | None]], cause: int
) -> None:
    found = cause_of([TaskEnd(*end) for end in ends])
    assert found is not None and found.rank == cause


KEYS = [
    ("RuntimeError: The server socket has failed to listen on any local network address. port: 29517, useIpv6: 0",
     "RuntimeError: The server socket has failed to listen on any local network address. port: 29641, useIpv6: 0",
     True),
    ("OSError: [Errno 98] Address already in use: ('10.0.3.4', 41234)",
     "OSError: [Errno 98] Address already in use: ('10.0.3.7', 52011)", True),
    ("ConnectionError: peer 10.1.2.3:29500 closed (pid 123456)",
     "ConnectionError: peer 10.1.2.9:29511 closed (pid 99812)", True),
    ("ValueError: bad value at 0x7f8b833e76c0", "ValueError: bad value at 0x7f00aa00bb10", True),
    ("ValueError: step 3 of 8", "ValueError: step 4 of 8", False),  # small numbers identify the error
    ("KeyError: 'lr'", "KeyError: 'momentum'", False),
    ("exit 3", "exit 4", False),
]  # fmt: skip


@pytest.mark.parametrize(("first", "second", "same"), KEYS)
def test_an_error_line_is_compared_without_its_changing_numbers(first: str, second: str, same: bool) -> None:
    assert (error_key(first) == error_key(second)) is same


def test_the_same_failure_on_another_port_is_a_repeated_failure() -> None:
    """decide_restart: the second start failed as the first, only the port moved: not restarted (REPEATED)."""
    from slurmgen.interruption.allocation import Failure, RestartFacts, decide_restart
    from slurmgen.interruption.states import RestartCause

    first = Failure("rank 0 on n1 (exit 1)", "OSError: [Errno 98] Address already in use: ('10.0.0.1', 29517)", "s40")
    again = Failure("rank 0 on n1 (exit 1)", "OSError: [Errno 98] Address already in use: ('10.0.0.1', 29641)", "s40")
    facts = RestartFacts(step_code=1, signals=(), stopping=False, restarts=1, max_restarts=3, failure=again,
                         previous=first)  # fmt: skip
    assert decide_restart(facts).cause == RestartCause.REPEATED
    other = Failure("rank 0 on n1 (exit 1)", "KeyError: 'lr'", "s40")
    assert decide_restart(RestartFacts(1, (), False, 1, 3, other, first)).restart


# (stop time, task ends, signals to the batch shell) -> the stop is a casualty's (a restart may follow)
STOPS = [
    (11.0, [(1, 137, "KILL", 10.0)], (), True),  # rank 1 killed; rank 0 took srun's TERM for a stop
    (11.0, [(1, 137, "KILL", 10.0)], ("USR1",), False),  # a preemption signal came: a real stop
    (9.0, [(1, 137, "KILL", 10.0)], (), False),  # the stop came first: it is the job's own
    (11.0, [], (), False),  # no task failed: a stop
    (11.0, [(1, 76, None, 10.0)], (), False),  # only a casualty failed: no cause to blame the stop on
    (None, [(1, 137, "KILL", 10.0)], (), False),  # no stop
]


@pytest.mark.parametrize(("stop", "ends", "signals", "casualty"), STOPS)
def test_a_stop_caused_by_a_casualtys_signal_is_not_a_stop(
    stop: float | None, ends: list[tuple[int, int, str | None, float]], signals: tuple[str, ...], casualty: bool
) -> None:
    from slurmgen.interruption.casualty import stop_of_a_casualty

    assert stop_of_a_casualty(stop, [TaskEnd(*end) for end in ends], signals) is casualty


def test_without_kill_on_bad_exit_a_later_signal_is_its_own_end_and_a_stop_stays_a_stop() -> None:
    """srun: {kill-on-bad-exit: false}: srun sends the others nothing when rank 1 fails, so rank 0's SIGKILL after
    it (the OOM killer) is a failure of its own, not a casualty; a lost peer (76) still is one; rank 0's stop after
    rank 1's failure is a stop under way (a signal to the step alone), never taken for srun's TERM."""
    from slurmgen.interruption.casualty import is_casualty, stop_of_a_casualty

    ends = [TaskEnd(1, 3, None, 10.0), TaskEnd(0, 137, "KILL", 10.5), TaskEnd(2, 76, None, 10.6)]
    assert [is_casualty(end, ends) for end in ends] == [False, True, True]
    assert [is_casualty(end, ends, step_kills=False) for end in ends] == [False, False, True]
    found = cause_of(ends, step_kills=False)
    assert found is not None and found.rank == 1
    killed = [TaskEnd(1, 137, "KILL", 10.0)]
    assert stop_of_a_casualty(11.0, killed, ()) is True
    assert stop_of_a_casualty(11.0, killed, (), step_kills=False) is False


def test_a_raise_record_completes_its_ranks_exit_or_stands_for_the_exit_that_never_came() -> None:
    """Rank 0's exit came from the step's SIGTERM after it had raised, and was recorded without the raise; rank 2
    raised and its task ended before its record (a torchrun worker outlasting its agent); rank 1 lost them."""
    from slurmgen import run_history as rh
    from slurmgen.interruption.casualty import exit_records, first_failure

    events = [
        {"event": rh.TASK_EXIT, "run": 1, "rank": 1, "node": "b", "exit_code": 76, "time": 10.0},
        {"event": rh.TASK_EXIT, "run": 1, "rank": 0, "node": "a", "exit_code": 143, "signal": "TERM", "time": 11.0},
        {"event": rh.RAISED, "run": 1, "rank": 0, "node": "a", "raised": "KeyError: 'x'", "raised_at": 9.0,
         "time": 9.2},
        {"event": rh.RAISED, "run": 1, "rank": 2, "node": "c", "raised": "ValueError: bad", "raised_at": 8.5,
         "time": 8.7},
        {"event": rh.RAISED, "run": 2, "rank": 3, "node": "d", "raised": "OSError: gone", "raised_at": 50.0,
         "time": 50.1},
    ]  # fmt: skip
    merged = {e["rank"]: e for e in exit_records(events, 1)}
    assert sorted(merged) == [0, 1, 2]
    assert (merged[0]["exit_code"], merged[0]["raised_at"]) == (143, 9.0)
    assert (merged[2]["event"], merged[2]["exit_code"], merged[2]["raised"]) == (rh.TASK_EXIT, 1, "ValueError: bad")
    cause = first_failure(events, 1)
    assert cause is not None and (cause.rank, cause.exit_code) == (2, 1)  # the earliest raise
