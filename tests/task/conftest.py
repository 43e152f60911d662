"""Fixtures for the entry point and supervisor tests (the multi-rank launcher is tests/ranks.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ranks import Launcher, Ranks
from runtime.runtime_helpers import ROOT


@pytest.fixture
def ranks(launcher: Launcher) -> Iterator[Ranks]:
    """One launch of rank processes started in the repository root (the launcher reaps them)."""
    yield launcher.new(cwd=ROOT)
