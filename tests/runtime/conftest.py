"""Fixtures for the runtime tests (helpers live in runtime_helpers.py so test modules can import them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ranks import Launcher, Ranks

from .runtime_helpers import ROOT


@pytest.fixture
def ranks(launcher: Launcher) -> Iterator[Ranks]:
    """One launch of rank processes started in the repository root (the launcher reaps them)."""
    yield launcher.new(cwd=ROOT)


def pytest_configure(config: pytest.Config) -> None:
    # torch 2.13 CPU warns on import when NumPy is absent; NumPy is not a dependency of slurmgen.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy:UserWarning")
