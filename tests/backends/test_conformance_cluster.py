"""The conformance suite (conformance.py) over the kinds that need the real test cluster: Slurm on this machine,
and Slurm over ssh through the cluster's login node behind sshd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conformance import (
    Door,
    open_door,
    test_an_ended_job_answers_or_says_why_not_in_one_line_through_every_door,
    test_cancel_ends_a_job_that_has_not_ended,
    test_history_and_report_read_the_finished_job,
    test_submit_gives_the_id_that_status_and_logs_take,
    test_what_a_kind_cannot_do_is_one_line_from_the_backend,
)

pytestmark = pytest.mark.slurm

__all__ = [
    "test_an_ended_job_answers_or_says_why_not_in_one_line_through_every_door",
    "test_cancel_ends_a_job_that_has_not_ended",
    "test_history_and_report_read_the_finished_job",
    "test_submit_gives_the_id_that_status_and_logs_take",
    "test_what_a_kind_cannot_do_is_one_line_from_the_backend",
]


@pytest.fixture(params=["slurm", "ssh"])
def door(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Door]:
    yield from open_door(str(request.param), request, tmp_path, monkeypatch)
