"""queries/fanout.py: many independent items over this machine's CPUs, in order, with real forked children."""

from __future__ import annotations

import os

import pytest

from slurmgen.queries import fanout


def whose(start: int, stop: int) -> list[tuple[int, int]]:
    return [(i, os.getpid()) for i in range(start, stop)]


def test_many_items_are_made_in_forked_children_and_joined_in_order() -> None:
    made = fanout.spread(fanout.FANOUT_FROM * 2, whose, workers=3)
    assert [i for i, _ in made] == list(range(fanout.FANOUT_FROM * 2))
    pids = list(dict.fromkeys(pid for _, pid in made))
    assert len(pids) == 3 and pids[0] == os.getpid()  # the first span here, the others in two children


def test_few_items_or_one_cpu_stay_in_this_process() -> None:
    assert {pid for _, pid in fanout.spread(10, whose, workers=4)} == {os.getpid()}
    assert {pid for _, pid in fanout.spread(fanout.FANOUT_FROM, whose, workers=1)} == {os.getpid()}


def test_a_childs_error_reaches_the_caller() -> None:
    def failing(start: int, stop: int) -> list[int]:
        if start > 0:
            raise ValueError(f"span {start}")
        return list(range(start, stop))

    with pytest.raises(ValueError, match="span"):
        fanout.spread(fanout.FANOUT_FROM, failing, workers=2)
