"""One scenario through the engine: run it at its place, check every invariant, and say a failure as its one-line
reproduction (the `slurmgen run ...` command line plus the spec). Shared by tests/scenarios/test_corpus.py and
bench/seams.py."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from scenarios import invariants, local_place
from scenarios.axes import Scenario
from scenarios.observation import Observation


@dataclass(frozen=True)
class Verdict:
    scenario: Scenario
    plan: local_place.Plan
    observation: Observation
    violations: dict[str, list[str]]  # invariant -> its violations
    missed: bool  # a rehearsal never fired (the run ended first, or no program ran then): nothing to judge

    @property
    def ok(self) -> bool:
        return self.missed or not any(self.violations.values())

    def outcome(self) -> str:
        final = self.observation.final()
        return "MISSED" if self.missed else final[0] if final else "NONE"

    def story(self) -> str:
        lines = [f"scenario: {self.scenario.words()}", f"reproduce: {self.plan.reproduction()}"]
        lines += [f"  {line}" for found in self.violations.values() for line in found]
        return "\n".join(lines)


def judge(s: Scenario, where: Path | None = None) -> Verdict:
    where = where or Path(tempfile.mkdtemp(prefix="scenario-"))
    plan, seen = local_place.run(s, where)
    missed = "never fired" in seen.runner
    found = {} if missed else invariants.check(s, plan.steps, seen)
    return Verdict(s, plan, seen, found, missed)


def judge_on_cluster(s: Scenario, cluster: object, where: Path, site: object = None) -> Verdict:
    """The same judgement of a scenario run on the real test cluster (cluster_place), submitted as a user does:
    on its login node, or from a laptop through a cluster profile (``site``, a cluster_place.Site)."""
    from scenarios import cluster_place

    plan, seen = cluster_place.run(s, where, cluster, site)  # type: ignore[arg-type]
    missed = "never fired" in seen.runner
    found = {} if missed else invariants.check(s, plan.steps, seen)
    return Verdict(s, plan, seen, found, missed)
