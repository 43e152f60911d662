"""The scenario engine in CI: a fixed corpus on the local emulator (real `slurmgen run`, real processes, real
signals, real torch on gloo), every invariant on each. Together the cases take every axis value at least once
(test_axes.py checks it) but the time limit: its spec needs a limit of two minutes (a shorter one could signal at
the start: spec/rules.py) and a program that outlives it, over three minutes of this corpus's budget, so the soak
(bench/seams.py) draws it; the named ones are regressions of seams two features met at. A failure prints the
scenario's one-line reproduction. Bench: bench/seams.py runs random ones through the same engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from scenarios.axes import Interruption, Scenario, why_invalid
from scenarios.engine import judge

# The rehearsals that a phase of the program depends on (a crash, a hang, a preemption beside a save or during a
# restart) come at a step of rank 0's program (`slurmgen run --at-step`, `--preempt-at-step`), not at a second: in a
# full CI run on two cores (load average about 15) the programs start late, and cases timed by the clock missed
# or changed their phase.
pytestmark = [pytest.mark.slow, pytest.mark.torch]

I = Interruption  # noqa: E741 - the corpus reads as a table

NAMED = [
    # a crash restarted inside the allocation that then completes: COMPLETED, the resume state removed
    Scenario("pg", "srun", 1, 1, "runtime", True, (I("crash", 0, 12),), name="crash-restart-completes"),
    # an ended job shows its last step, and neither rate nor ETA (one_story)
    Scenario("nopg", "torchrun", 1, 1, "runtime", True, (I("preempt_first"),), name="ended-shows-last-step"),
    # the step's restarts beside the job's requeues, counted apart in status, report and Job: a crash restarted
    # inside the allocation at step 14, then a preemption at the restarted program's first marked step (requeued by
    # Preemption)
    Scenario("pg", "srun", 1, 1, "runtime", True, (I("preempt_restart", 0, 14),), name="restarts-beside-requeues"),
    # the failing rank exits after its casualties (its atexit hooks linger): it is the cause, not rank 0
    Scenario("pg", "srun", 1, 2, "auto", True, (I("crash_late", 1, 20),), name="late-failing-rank-is-the-cause"),
    # `set -e` in setup and a program that fails the same way every start, under max_restarts 1: one restart, then
    # FAILED with the program's own exit code
    Scenario(
        "own",
        "srun",
        1,
        1,
        "requeue",
        True,
        (I("bug", 0, 5),),
        name="set-e-setup-repeated-bug",
        extra="setup: ['set -e']\nrecovery: {max_restarts: 1}\n",
    ),
    # a job that failed shows the step its program failed at, not a progress sample taken before (Preemption's
    # exit hook records a last sample when an exception ended the program)
    Scenario("pg", "srun", 1, 2, "runtime", False, (I("bug", 0, 20),), name="failed-job-shows-last-step"),
    # handler auto, a program without Preemption that finishes during auto's wait: COMPLETED in one run
    Scenario("own", "srun", 1, 1, "auto", True, (I("preempt_save", 0, 16),), name="auto-finishes-in-the-wait"),
    # a program that saves and resumes its own checkpoint, unwatched, read by its printed step: a crash restart
    # loses the steps past its own save of step 10 (where the next start's first line shows it resumed), and
    # their time, not every step since the start's first
    Scenario("own", "srun", 1, 2, "program", True, (I("crash", 1, 14),), name="own-checkpoint-crash-resumes"),
]
AXES = [
    Scenario("pg", "srun", 2, 1, "auto", True, (I("bad_node"),), name="bad-node"),
    Scenario("pg", "srun", 1, 1, "runtime", True, (I("hang", 0, 20),), name="hang"),
    Scenario("nopg", "srun", 2, 2, "program", False, (I("crash", 3, 20),), name="crash-without-recovery"),
    Scenario("own", "srun", 1, 1, "auto", True, (I("cancel_resume", 0, 30),), name="cancel-then-resume"),
    # the framework shape: Lightning with slurmgen's callback; a crash resumes from its own periodic save
    Scenario("lightning", "srun", 1, 2, "runtime", True, (I("crash", 1, 14),), name="lightning-crash-resumes"),
]
CORPUS = NAMED + AXES


@pytest.mark.parametrize("scenario", CORPUS, ids=[s.name for s in CORPUS])
def test_every_invariant_holds(scenario: Scenario, tmp_path: Path) -> None:
    assert why_invalid(scenario) is None, scenario.name
    verdict = judge(scenario, tmp_path)
    assert not verdict.missed, f"the rehearsal never fired: the case tests nothing\n{verdict.story()}"
    assert verdict.ok, verdict.story()
    final = verdict.observation.final()
    assert final is not None
    if scenario.name == "auto-finishes-in-the-wait":
        assert final[:3] == ("COMPLETED", 0, 1), verdict.story()
    if scenario.name == "set-e-setup-repeated-bug":
        assert final[:2] == ("FAILED", 1), verdict.story()
    if scenario.name == "crash-restart-completes":
        assert final[0] == "COMPLETED" and verdict.observation.job["restarts"]["restarts"] >= 1, verdict.story()
    if scenario.name == "restarts-beside-requeues":
        assert verdict.observation.job["restarts"] == {"requeues": 1, "restarts": 1}, verdict.story()
