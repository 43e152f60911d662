"""The scenario engine's soak: N random scenarios (hypothesis draws them from tests/scenarios/axes.py, seeded)
through the same engine as the CI corpus (tests/scenarios/engine.py: the local emulator, every invariant).

    python bench/seams.py --scenarios 20 --seed 1 --budget 1800 [--parallel 2]

Prints one line per scenario as it ends, then a table of invariants x outcomes (how many scenarios that ended so
held / violated each invariant) and, for every failure, the shrunk scenario's one-line reproduction: hypothesis
shrinks a failing scenario towards a smaller one (fewer interruptions, fewer ranks, earlier values) while the budget
lasts (hypothesis.find over the scenarios no bigger than it), each try a real run. Exits 1 on a violation, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, find, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from scenarios import axes, invariants
from scenarios.axes import Scenario
from scenarios.engine import Verdict, judge


def table(verdicts: list[Verdict]) -> str:
    outcomes = sorted({v.outcome() for v in verdicts})
    cells: Counter[tuple[str, str, bool]] = Counter()
    for v in verdicts:
        for name in invariants.ALL:
            cells[(name, v.outcome(), not v.violations.get(name))] += 1
    width = max(len(o) for o in [*outcomes, "invariant"]) + 8
    lines = ["invariant".ljust(12) + "".join(o.rjust(width) for o in outcomes) + "   (held/violated)"]
    for name in invariants.ALL:
        row = "".join(f"{cells[(name, o, True)]}/{cells[(name, o, False)]}".rjust(width) for o in outcomes)
        lines.append(name.ljust(12) + row)
    return "\n".join(lines)


def smaller_than(s: Scenario) -> st.SearchStrategy[Scenario]:
    """Scenarios no bigger than s: some of its interruptions, no more nodes or ranks, the same other axes."""
    sizes = [(n, t) for n, t in axes.SIZES if n <= s.nodes and t <= s.tasks]

    @st.composite
    def draw(d: st.DrawFn) -> Scenario:
        nodes, tasks = d(st.sampled_from(sizes))
        kept = d(st.lists(st.sampled_from(s.interruptions), min_size=1, unique=True))
        smaller = replace(s, nodes=nodes, tasks=tasks, interruptions=tuple(kept))
        assume(axes.why_invalid(smaller) is None)
        return smaller

    return draw()


def shrink(failed: Verdict, deadline: float) -> Verdict:
    """The smallest scenario hypothesis finds that still violates one of the invariants the failure violated."""
    broken = {name for name, found in failed.violations.items() if found}
    seen = {failed.scenario: failed}

    def still_fails(s: Scenario) -> bool:
        if s not in seen and time.monotonic() < deadline:
            seen[s] = judge(s)
            print(f"  shrink: {'FAIL' if not seen[s].ok else 'ok  '} {s.words()}", flush=True)
        v = seen.get(s)
        return v is not None and not v.missed and any(v.violations.get(name) for name in broken)

    try:
        found = find(smaller_than(failed.scenario), still_fails,
                     settings=settings(max_examples=30, database=None, deadline=None,
                                       suppress_health_check=list(HealthCheck)))  # fmt: skip
    except (NoSuchExample, Unsatisfiable):
        return failed
    return seen[found]


def draw(count: int, at_seed: int) -> list[Scenario]:
    """``count`` scenarios, drawn by hypothesis from ``at_seed`` (the same list for the same seed and count)."""
    drawn: list[Scenario] = []

    @seed(at_seed)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(axes.scenarios())
    def collect(s: Scenario) -> None:
        if len(drawn) < count:
            drawn.append(s)

    collect()
    return drawn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds for the runs and their shrinking")
    parser.add_argument("--parallel", type=int, default=1, help="scenarios run at once (each is its own job)")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget
    started = time.monotonic()

    def run(s: Scenario) -> Verdict | None:
        if time.monotonic() > deadline:
            return None  # the budget is spent
        t = time.monotonic()
        verdict = judge(s)
        print(f"{time.monotonic() - t:6.1f} s  {verdict.outcome():10} {'ok  ' if verdict.ok else 'FAIL'} "
              f"{s.words()}", flush=True)  # fmt: skip
        return verdict

    scenarios = draw(args.scenarios, args.seed)
    # Each scenario is a job of its own (its directory, its port, its /dev/shm names), so several can run at once.
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        drawn = [v for v in pool.map(run, scenarios) if v is not None]
    print(f"\n{len(drawn)} of {len(scenarios)} scenarios in {time.monotonic() - started:.0f} s "
          f"(seed {args.seed}, {args.parallel} at once)\n")  # fmt: skip
    print(table(drawn))
    failures = [v for v in drawn if not v.ok]
    for failed in failures:
        smallest = shrink(failed, deadline)
        print("\nfailure:\n" + failed.story() + "\nshrunk to:\n" + smallest.story(), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
