"""The uninterrupted run of each example program, made once per test run: what a preempted run must end with.
The local worker and a cluster version's worker both need Lightning's (a 4-rank run, about 50 s of CPU on the CI
machine): tests/once_per_run.py makes it once for both."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from once_per_run import once_per_run

from .integration_helpers import final_digest, needs, run_local


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[str, float]]:
    """reference(framework) -> (final weights of an uninterrupted local run, its duration in seconds)."""

    def make(framework: str) -> list[object]:
        run = run_local(framework, tmp_path_factory.mktemp(f"reference-{framework}"))
        assert run.code == 0, run.runner + run.logs[-4000:]
        return [final_digest(run.logs), run.seconds]

    def get(framework: str) -> tuple[str, float]:
        needs(framework)
        digest, seconds = once_per_run(tmp_path_factory, f"reference-{framework}", lambda: make(framework))
        return str(digest), float(seconds)

    return get
