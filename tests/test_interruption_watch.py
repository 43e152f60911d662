"""The preemption watcher's decision (slurmgen.interruption.decide_preempt_watch, through decide) as a
table. The watcher process itself, with a real batch shell and a scontrol stand-in, is
tests/batch/test_batch_watch.py."""

from __future__ import annotations

import pytest

from slurmgen.interruption import decide
from slurmgen.interruption.allocation import WatchFacts, preempt_watch_needed
from slurmgen.interruption.requeue_route import SiteFacts
from slurmgen.interruption.states import WatchStep
from slurmgen.slurm.ids import version_tuple

WATCH_DONE, WATCH_SIGNAL, WATCH_WAIT = WatchStep.DONE, WatchStep.SIGNAL, WatchStep.WAIT

# (name, PreemptTime set (None: Slurm not answering), job running, signals the shell received, decision)
ROWS = [
    ("preempted, no notice: act as if the signal came", True, True, set(), WATCH_SIGNAL),
    ("preempted, the user signal came: done", True, True, {"USR1"}, WATCH_DONE),
    ("preempted, a TERM came (grace end, or no grace): done", True, True, {"TERM"}, WATCH_DONE),
    ("a clean-exit request came: done", False, True, {"USR2"}, WATCH_DONE),
    ("not preempted: ask again later", False, True, set(), WATCH_WAIT),
    ("Slurm did not answer: ask again later", None, True, set(), WATCH_WAIT),
    ("the job no longer runs (Slurm ends or requeues it): done", True, False, set(), WATCH_DONE),
    ("a CONT alone is no notice", True, True, {"CONT"}, WATCH_SIGNAL),
]


@pytest.mark.parametrize(("preempted", "running", "got", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_decide_preempt_watch(preempted: bool | None, running: bool, got: set[str], expected: str) -> None:
    assert decide(WatchFacts(preempted, running, frozenset(got), "USR1")) == expected


def test_another_preemption_signal_counts_as_the_notice() -> None:
    assert decide(WatchFacts(True, True, frozenset({"USR1"}), "URG")) == WATCH_SIGNAL
    assert decide(WatchFacts(True, True, frozenset({"URG"}), "URG")) == WATCH_DONE


# (name, the site recorded at the run's start, whether the watcher has anything to wait for)
NEEDED = [
    ("unknown site (Slurm not asked): watch", {}, True),
    ("REQUEUE with grace: watch", {"mode": "REQUEUE", "grace": 60, "preempt_type": "preempt/partition_prio"}, True),
    ("CANCEL with grace: watch", {"mode": "CANCEL", "grace": 30, "preempt_type": "preempt/partition_prio"}, True),
    ("REQUEUE without grace: the TERM is the notice", {"mode": "REQUEUE", "grace": 0}, False),
    ("no preemption on this site", {"mode": "OFF", "grace": 0, "preempt_type": "preempt/none"}, False),
    ("SUSPEND: nothing to save for", {"mode": "SUSPEND", "grace": 60}, False),
    (
        "preempt/qos: the QOS's grace is unknown: watch",
        {"mode": "REQUEUE", "grace": 0, "preempt_type": "preempt/qos"},
        True,
    ),
    ("a grace that is not a number: watch", {"mode": "REQUEUE", "grace": "soon"}, True),
]


@pytest.mark.parametrize(("site", "expected"), [r[1:] for r in NEEDED], ids=[r[0] for r in NEEDED])
def test_preempt_watch_needed(site: dict[str, object], expected: bool) -> None:
    assert preempt_watch_needed(site) is expected


# (name, the site recorded at the run's start, whether Slurm ends the job PREEMPTED even if it is requeued)
GRACE_MARKED = [
    ("CANCEL with grace on 24.11", {"mode": "CANCEL", "grace": 30, "version": "24.11.5"}, True),
    ("CANCEL with grace on 24.05", {"mode": "CANCEL", "grace": 30, "version": "24.05.0"}, True),
    (
        "CANCEL with grace on 23.11: the flag did not end jobs PREEMPTED yet",
        {"mode": "CANCEL", "grace": 30, "version": "23.11.1"},
        False,
    ),
    ("CANCEL without grace: no flag", {"mode": "CANCEL", "grace": 0, "version": "24.11.5"}, False),
    ("REQUEUE with grace: Slurm requeues it itself", {"mode": "REQUEUE", "grace": 30, "version": "24.11.5"}, False),
    ("unknown version: requeue as before", {"mode": "CANCEL", "grace": 30}, False),
]


@pytest.mark.parametrize(("site", "expected"), [r[1:] for r in GRACE_MARKED], ids=[r[0] for r in GRACE_MARKED])
def test_slurm_ends_graced_preempted(site: dict[str, object], expected: bool) -> None:
    from slurmgen.interruption.requeue_route import slurm_ends_graced_preempted

    version = site.get("version")
    facts = SiteFacts.of(site, version_tuple(version if isinstance(version, str) else None))
    assert slurm_ends_graced_preempted(facts) is expected
