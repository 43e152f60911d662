"""The uninterrupted run of each example program, made once per session: what a preempted run must end with."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .integration_helpers import final_digest, needs, run_local


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[str, float]]:
    """reference(framework) -> (final weights of an uninterrupted local run, its duration in seconds)."""
    made: dict[str, tuple[str, float]] = {}

    def get(framework: str) -> tuple[str, float]:
        needs(framework)
        if framework not in made:
            run = run_local(framework, tmp_path_factory.mktemp(f"reference-{framework}"))
            assert run.code == 0, run.runner + run.logs[-4000:]
            made[framework] = (final_digest(run.logs), run.seconds)
        return made[framework]

    return get
