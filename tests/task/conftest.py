"""Fixtures for the entry point and supervisor tests (the multi-rank group is the runtime tests' own helper)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runtime.runtime_helpers import RankProcs


@pytest.fixture
def ranks() -> Iterator[RankProcs]:
    group = RankProcs()
    yield group
    group.kill()
