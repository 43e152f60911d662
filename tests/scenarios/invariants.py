"""The job's whole story against what really happened: each invariant is a function of the scenario, the steps
its program had to do and an Observation, and returns its violations (one line each; none: it holds)."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import Any

from scenarios.axes import FAILURES, Scenario
from scenarios.observation import Observation
from scenarios.program import expected_result
from slurmgen.progress_mark import MARK_PERIOD

ENDED_STATES = ("FAILED", "PREEMPTED", "CANCELLED", "TIMEOUT")


def expected_outcome(s: Scenario, o: Observation | None = None) -> str:
    """What the job must end as: COMPLETED, unless a failure ends it (a repeating bug; a crash without recovery).

    A bug repeats on every start that reaches its step. A start that resumed past it does not: with no process
    group to hold the ranks together (the nopg shape), rank 0 can be steps ahead of the failing rank when srun
    stops it, and its Preemption saves the step it is at; the restart resumes from there, and the job completes."""
    kinds = s.kinds()
    if "bug" in kinds:
        return "COMPLETED" if o is not None and resumed_past_bug(s, o) else "FAILED"
    if not s.recovery and {"crash", "crash_late", "preempt_restart"} & set(kinds):
        # A preemption that came first governs: Slurm requeues a preempted job whatever its program does in the
        # grace time, and a failure within it is no failure of the job's (the next run resumes and completes).
        return "COMPLETED" if o is not None and preempted_first(s, o) else "FAILED"
    return "COMPLETED"


def preempted_first(s: Scenario, o: Observation) -> bool:
    """Whether the engine's preemption signal was sent before any task of the run it hit had exited, and the
    failure came in that run. A failure in a run after it (the requeued run reached the crash's step first) is the
    job's own, which nothing but recovery restarts."""
    sent = [e for e in o.events if e.get("event") == "rehearsal" and e.get("what") == "preempt"]
    if not sent:
        return False
    run, at = int(sent[0].get("run") or 0), float(sent[0].get("time") or 0.0)
    exits = [float(e.get("time") or 0.0) for e in o.events if e.get("event") == "task-exit" and e.get("run") == run]
    causes = failing_ranks(s)
    later = [
        e
        for e in o.events
        if int(e.get("run") or 0) > run
        and (
            (e.get("event") == "rehearsal" and e.get("what") == "kill")
            or (e.get("event") in ("raised", "task-exit") and e.get("rank") in causes)
        )
    ]
    return all(at < t for t in exits) and not later


def resumed_past_bug(s: Scenario, o: Observation) -> bool:
    """Whether the bug's rank resumed, on some start, from a step past the bug's (its log's `RESUMED n`)."""
    bug = next(i for i in s.interruptions if i.kind == "bug")
    resumed = [int(n) for n in re.findall(r"^RESUMED (\d+) ", o.ranks.get(bug.rank, ""), re.M)]
    return any(n > bug.at for n in resumed)


def failing_ranks(s: Scenario) -> set[int]:
    """The ranks that fail on their own in the scenario (a crash, a bug, a late failure, a hang: the rank that
    stopped, never a peer left waiting on it in a collective); a casualty is none."""
    return {i.rank for i in s.interruptions if i.kind in FAILURES}


def results(o: Observation) -> dict[int, list[int]]:
    return {rank: [int(x) for x in re.findall(r"^RESULT (\d+)$", text, re.M)] for rank, text in o.ranks.items()}


def finished(s: Scenario, o: Observation) -> bool:
    """Every rank printed its result: the program did all its work."""
    got = results(o)
    return len(got) == s.world and all(got.get(rank) for rank in range(s.world))


def result(s: Scenario, steps: int, o: Observation) -> list[str]:
    """A deterministic program ends with exactly the uninterrupted result, on every rank that ends."""
    want = expected_result(steps, s.world)
    wrong = {rank: got for rank, got in results(o).items() if any(x != want for x in got)}
    return [f"result: rank {rank} ended with {got}, the uninterrupted run gives {want}" for rank, got in wrong.items()]


def outcome(s: Scenario, steps: int, o: Observation) -> list[str]:
    """COMPLETED exactly when the program finished its work; otherwise an ended state with the program's own exit
    code, naming the rank that failed on its own; a failure repeating at the same step is restarted once at most."""
    final = o.final()
    if final is None:
        return ["outcome: the runner printed no outcome line"]
    state, code, _ = final
    out = []
    done = finished(s, o)
    if (state == "COMPLETED") != done:
        out.append(f"outcome: {state} but the program {'did' if done else 'did not'} finish its work")
    if state != "COMPLETED" and state not in ENDED_STATES:
        out.append(f"outcome: {state} is no end")
    if state != (expected := expected_outcome(s, o)):
        out.append(f"outcome: {state}, expected {expected}")
    if o.exit_code != code:
        out.append(f"outcome: the runner exited {o.exit_code} but said exit code {code}")
    causes = failing_ranks(s)
    blamed = [e.get("rank") for e in o.events if e.get("event") in ("restart", "repeated-failure")]
    if causes and any(b is not None and b not in causes for b in blamed):
        out.append(f"outcome: the failure is blamed on ranks {blamed}, the ranks that failed on their own are "
                   f"{sorted(causes)}")  # fmt: skip
    if state == "FAILED":
        own = [e for e in o.events if e.get("event") == "task-exit"]
        codes = {int(e["exit_code"]) for e in own}
        if own and code not in codes:
            out.append(f"outcome: exit code {code} is none of the failing programs' own codes {sorted(codes)}")
        ends = [e.get("failing") for e in o.events if e.get("event") == "run-end" and e.get("failing")]
        named = [f.get("rank") if isinstance(f, dict) else int(m[1]) if (m := re.match(r"rank (\d+)", str(f))) else None
                 for f in ends]  # fmt: skip
        if causes and any(n is not None and n not in causes for n in named):
            out.append(f"outcome: the job's end is blamed on ranks {named}, the ranks that failed on their own are "
                       f"{sorted(causes)}")  # fmt: skip
    if "bug" in s.kinds():
        restarts = [e for e in o.events if e.get("event") == "restart"]
        if len(restarts) > (1 if s.recovery else 0):
            out.append(f"outcome: a failure repeating at the same step was restarted {len(restarts)} times")
    return out


def state(s: Scenario, steps: int, o: Observation) -> list[str]:
    """No resume state after COMPLETED; none deleted before the work is done."""
    final = o.final()
    left = [f for f in o.state_files if f.endswith(".state") or ".state." in f]
    removed = [e for e in o.events if e.get("event") == "state-removed"]
    out = []
    if final and final[0] == "COMPLETED" and left:
        out.append(f"state: the job completed and left its resume state {left}")
    if not finished(s, o) and removed:
        out.append(f"state: the resume state was removed ({removed[0].get('paths')}) before the work was done")
    # slurmgen keeps a resume state only for Preemption's saves: the own shape's and Lightning's periodic saves
    # (ModelCheckpoint) are the program's files, outside slurmgen's state directory
    if final and final[0] != "COMPLETED" and s.shape in ("pg", "nopg") and saved(o) and not left:
        out.append("state: the job ended before its work was done and its saved state is gone")
    return out


def saved(o: Observation) -> bool:
    return any(re.search(r"^SAVED \d+$", text, re.M) for text in o.ranks.values())


def last_step(o: Observation) -> int:
    steps = [int(x) for x in re.findall(r"^STEP (\d+)$", o.ranks.get(0, ""), re.M)]
    return steps[-1] if steps else 0


MARK_AGE = MARK_PERIOD  # seconds: the most a rank's node mark lags its program (slurmgen/progress_mark.py)
SLOWEST_STEP_TIME = 0.1  # seconds: the quickest step of the engine's programs, when the history times none


def marked_lag(o: Observation) -> int:
    """How many steps the last recorded sample may be behind rank 0's last printed step: none, unless its program
    was killed before it recorded its last and its supervisor recorded what the node mark held instead
    (`from_mark`), which is at most MARK_AGE old: the steps of that time, and the one under way."""
    samples = sorted((e for e in o.events if e.get("event") in ("first-step", "progress")), key=lambda e: e["time"])
    if not samples or not samples[-1].get("from_mark"):
        return 0
    step_seconds = [float(e["step_seconds"]) for e in samples if e.get("step_seconds")]
    return math.ceil(MARK_AGE / min(step_seconds or [SLOWEST_STEP_TIME])) + 1


def resumed_at(o: Observation) -> int:
    """The step rank 0's last start of its program resumed from (0: from scratch), if it stepped after it."""
    text = o.ranks.get(0, "")
    starts = [(m.start(), int(m[1])) for m in re.finditer(r"^RESUMED (\d+) ", text, re.M)]
    if not starts:
        return 0
    position, step = starts[-1]
    # a start that printed no RESUMED (no state yet) began after the last resumed one when its first STEP is 1
    if re.search(r"^STEP 1$", text[position:], re.M):
        return 0
    return step


def steps_done_again(o: Observation) -> int:
    """The steps rank 0's program did again: each `STEP n` line after the first of its n (a restart or a requeue
    that resumed from a save before n, or from scratch)."""
    seen: set[str] = set()
    again = 0
    for step in re.findall(r"^STEP (\d+)$", o.ranks.get(0, ""), re.M):
        again += step in seen
        seen.add(step)
    return again


def table_row(status: str) -> dict[str, str]:
    lines = [line for line in status.splitlines() if line.strip()]
    if len(lines) < 2 or not lines[0].startswith("JOB"):
        return {}
    head = re.split(r"\s{2,}", lines[0].strip())
    return dict(zip(head, re.split(r"\s{2,}", lines[1].strip()), strict=False))


STEP_TIMED = {"crash", "preempt_save", "preempt_restart"}  # rehearsals at a step of rank 0's program (local_place)


def counts_redone(s: Scenario) -> bool:
    """Whether slurmgen can count the steps the scenario's program did again. The own shape saves and resumes by
    itself, unwatched, and its spec reads its steps from its output only when a rehearsal is timed by them
    (local_place): then its restarts and requeues are counted from where the next start or run resumed. A hang,
    a bad node, a cancel or the time limit beside them, and its own failures alone (no progress read), are not."""
    kinds = set(s.kinds())
    return s.shape != "own" or (bool(kinds & STEP_TIMED) and kinds <= STEP_TIMED | {"crash_late"})


def stops(o: Observation) -> int:
    """The job's stops that a next start or run resumed from: its restarts and its runs after the first."""
    runs = {e.get("run") for e in o.events if e.get("event") == "run-start"}
    return sum(1 for e in o.events if e.get("event") == "restart") + max(len(runs) - 1, 0)


def one_story(s: Scenario, steps: int, o: Observation) -> list[str]:
    """status, history, report --json and slurmgen.Job agree with each other and with the ranks."""
    out = []
    row = table_row(o.status)
    report, job = o.report, o.job
    if "error" in report or "error" in job:
        return [f"one story: report or Job failed: {report.get('error') or job.get('error')}"]
    runs = [e for e in o.events if e.get("event") == "run-start"]
    restarts = [e for e in o.events if e.get("event") == "restart"]
    final = o.final()
    run_numbers = len({e.get("run") for e in runs})
    told = {
        "runs (runner)": final[2] if final else None,
        "runs (report)": len(report.get("runs", [])),
        "runs (Job.history)": len(job.get("history", [])),
        "runs (run history)": run_numbers,
    }
    if len(set(told.values())) != 1:
        out.append(f"one story: runs disagree: {told}")
    requeues = {
        "status": row.get("REQUEUES"),
        "report": str(report.get("requeues")),
        "Job": str(job.get("restarts", {}).get("requeues")),
        "runs - 1": str(max(run_numbers - 1, 0)),
    }
    if len(set(requeues.values())) != 1:
        out.append(f"one story: requeues disagree: {requeues}")
    step_restarts = {
        "status": row.get("STEP RESTARTS"),
        "report": str(report.get("restarts")),
        "Job": str(job.get("restarts", {}).get("restarts")),
        "run history": str(len(restarts)),
    }
    if len(set(step_restarts.values())) != 1:
        out.append(f"one story: step restarts disagree: {step_restarts}")
    if final:
        said = {"status": row.get("STATE"), "Job": job.get("state"), "runner": final[0]}
        if len(set(said.values())) != 1:
            out.append(f"one story: the job's state disagrees: {said}")
        if row.get("EXIT") != str(final[1]) or job.get("exit_code") != final[1]:
            out.append(f"one story: exit code: status {row.get('EXIT')}, Job {job.get('exit_code')}, runner {final[1]}")
    if report.get("runs") and final and counts_redone(s):
        # the steps lost to restarts and requeues, against the steps rank 0's program really did again (10%, and
        # a step a stop: a program that raised after its step's work and before its line did that step unprinted,
        # and a program's first printed line after it resumed is the step it resumed at or the one after it)
        again, counted = steps_done_again(o), report.get("redone_steps") or 0
        if abs(counted - again) > max(0.1 * again, stops(o), 1):
            out.append(f"one story: the report counts {counted} steps redone, rank 0's program did {again} again")
    if s.shape != "own" and report.get("runs") and final:
        # the report's `steps`: those rank 0 made in the last start of its program (docs: goodput)
        made, lag = last_step(o) - resumed_at(o), marked_lag(o)
        shown = report["runs"][-1].get("steps") or 0  # no sample (None) before the first step
        if not made - lag <= shown <= made:
            out.append(f"one story: the report's last run made {shown} steps, rank 0 made {made} in its last start"
                       + (f" (the node mark's last sample may lag {lag})" if lag else ""))  # fmt: skip
        status_step = re.search(r"^step: (\d+)", o.status, re.M)
        if status_step and not last_step(o) - lag <= int(status_step[1]) <= last_step(o):
            out.append(f"one story: status shows step {status_step[1]}, rank 0 printed step {last_step(o)} last"
                       + (f" (the node mark's last sample may lag {lag})" if lag else ""))  # fmt: skip
    if final and re.search(r"\bETA\b|steps/s|/step\b", o.status):
        out.append("one story: an ended job's status shows a rate or an ETA")
    return out


def dying_pace(events: list[dict[str, Any]]) -> float:
    """The slowest step time of the stretches that ended in a restart: each restart's start's last progress sample
    (`last`, recorded when the program died), which spans its steps since the sample before it up to the death; 0.0
    when none says one."""
    paces = []
    for restart in (e for e in events if e.get("event") == "restart"):
        at = float(restart.get("time") or 0.0)
        before = [e for e in events if e.get("event") == "progress" and e.get("last")
                  and e.get("run") == restart.get("run") and float(e.get("time") or 0.0) <= at]  # fmt: skip
        if before:
            latest = max(before, key=lambda e: float(e.get("time") or 0.0))
            paces.append(float(latest.get("step_seconds") or 0.0))
    return max(paces, default=0.0)


def goodput(s: Scenario, steps: int, o: Observation) -> list[str]:
    """Segments tile each run; productive + buckets = wall; the redone bucket = steps redone x step time (10%, and
    at least one step; one more above: the step under way when the program died)."""
    report = o.report
    if "error" in report:
        return [f"goodput: no report: {report['error']}"]
    out = []
    runs = {r["run"]: r for r in report.get("runs", [])}
    segments = report.get("segments", [])
    for number, r in runs.items():
        # a run's segments may begin with its wait in the queue (after the previous run's end): that one ends
        # where the run starts, and the rest tile the run
        mine = [seg for seg in segments if seg[0] == number]
        if mine and mine[0][3] == "queue":
            mine = mine[1:]
        if not mine:
            out.append(f"goodput: run {number} has no segments")
            continue
        if abs(mine[0][1] - r["start"]) > 1e-3 or (r.get("end") and abs(mine[-1][2] - r["end"]) > 1e-3):
            spans = f"{mine[0][1]}..{mine[-1][2]}, the run {r['start']}..{r['end']}"
            out.append(f"goodput: run {number}'s segments span {spans}")
        gaps = [(a[2], b[1]) for a, b in itertools.pairwise(mine) if abs(a[2] - b[1]) > 1e-3]
        if gaps:
            out.append(f"goodput: run {number}'s segments leave gaps or overlap at {gaps[:3]}")
    buckets: dict[str, float] = report.get("buckets", {})
    productive = report.get("productive_seconds", 0.0)
    if productive is None:  # unknown: right only when no step was recorded (a program slurmgen knows no step of)
        if any(e.get("event") in ("first-step", "progress") for e in o.events):
            out.append("goodput: the productive time is unknown, yet the run history recorded the program's steps")
        productive = 0.0  # its time is in the `unknown` bucket, which still has to tile the wall with the others
    total = productive + sum(buckets.values())
    wall = report.get("wall_seconds", 0.0)
    if abs(total - wall) > max(0.01 * wall, 0.05):
        out.append(f"goodput: productive + buckets = {total:.3f} s, the wall {wall:.3f} s")
    redone_steps = report.get("redone_steps", 0)
    step_seconds = [r.get("step_seconds") for r in runs.values() if r.get("step_seconds")]
    if redone_steps and step_seconds:
        step_time = sum(step_seconds) / len(step_seconds)
        want = redone_steps * step_time
        # within 10%, and never closer than one step: the redone time runs from the restarted start's first step,
        # whose own time (a first step after a load) is no mean one. Up to one step more: a program killed mid-step
        # lost the step under way too (begun, never printed, done again), and its stretch ends when its death was
        # seen (the first task exit). Above, the steps may have run at the pace the program kept just before it
        # died, which a loaded machine slows below the run's mean.
        allowed = max(0.1 * want, step_time)
        most = redone_steps * max(step_time, dying_pace(o.events)) + step_time + allowed
        if not want - allowed <= buckets.get("redone", 0.0) <= most:
            out.append(f"goodput: redone {buckets.get('redone')} s for {redone_steps} steps redone, want {want:.3f} s"
                       f" (at most {most:.3f} s)")  # fmt: skip
    return out


def leftovers(s: Scenario, steps: int, o: Observation) -> list[str]:
    """Each submission leaves exactly one job, no process, no node directory under /dev/shm once ended."""
    out = []
    if o.jobs != 1:
        out.append(f"leftovers: {o.jobs} jobs in the journal, one submitted")
    if o.processes:
        out.append(f"leftovers: processes still running: {o.processes[:3]}")
    if o.shm:
        out.append(f"leftovers: /dev/shm directories left: {o.shm}")
    return out


Invariant = Callable[[Scenario, int, Observation], list[str]]
ALL: dict[str, Invariant] = {
    "result": result,
    "outcome": outcome,
    "state": state,
    "one story": one_story,
    "goodput": goodput,
    "leftovers": leftovers,
}


def check(s: Scenario, steps: int, o: Observation) -> dict[str, list[str]]:
    return {name: invariant(s, steps, o) for name, invariant in ALL.items()}


def describe(report: dict[str, Any]) -> str:
    return ", ".join(f"{k}={report.get(k)}" for k in ("requeues", "restarts", "redone_steps", "wall_seconds"))
