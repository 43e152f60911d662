"""How the batch shell's end walks: from the step's exit code to the job's, which of slurmgen's source files does
`python3 -m slurmgen.batch end RC` run code in, and where does it ask the interruption policy? Measured, not
guessed: `end` (the function the entry point calls, handed the context the entry point read once) runs in-process
under sys.setprofile on a realistic run directory (a preempted run whose program saved on the preemption signal and
exited 143, the site record and a resume state), and every function call in a slurmgen file is collected, in order,
with its caller. Module and class bodies run by an import are not counted: the walk is the calls.

What is checked is the rule the walk must keep, not its length: the end's decisions are the policy's, asked through
its one entry point. Every rule of the policy that the walk runs (a value of slurmgen.interruption.rules()) is called
by `decide`, never by the batch shell or the requeue directly, and the end's two rules (whether to requeue, then how
the run ends) are among them. How many files the walk crosses, and how often it comes back to one, is printed
(`pytest -s`) as a report: a count of files is no measure of a design (one concept per module is), so no bound is
kept on it."""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from slurmgen import run_history
from slurmgen.batch import commands as batch
from slurmgen.interruption import rules
from slurmgen.interruption.ending import decide_end, settle
from slurmgen.job_context.context import JobContext

from .test_batch import PREEMPT_TIME, OneJob, env_for

PACKAGE = Path(batch.__file__).resolve().parents[1]
ENTRY = ("interruption/__init__.py", "decide")  # the policy's one entry point


def realistic_run(tmp_path: Path) -> None:
    logs = str(tmp_path / "logs")
    site = {"mode": "REQUEUE", "grace": 60, "version": "23.11.1", "preempt_type": "preempt/partition_prio"}
    run_history.append(logs, "batch-shell", run_history.RUN_START, 1, 1.0, site=site, nodes="node[1-2]")
    run_history.append(logs, "rank0", run_history.HANDLER, 1, 2.0, handler="runtime")
    run_history.append(logs, "rank0", run_history.STOP, 1, 5.0, cause="preemption", step_seconds=2.0)
    run_history.append(logs, "rank0", run_history.SAVE, 1, 6.0, seconds=1.0, bytes=1, cause="preemption")
    # No task-exit record: a task's supervisor records one only for a failure of its program's own, and these
    # programs stopped because they were asked to (task/supervisor.py, _record_exit).
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "77.state").write_text("saved\n")


Place = tuple[str, str]  # a slurmgen file (relative to the package) and a function's name in it


@dataclass(frozen=True)
class Walk:
    code: int  # the exit code `end` returned
    files: list[str]  # the files the walk entered, in the order it entered them, one entry per entry
    calls: list[tuple[Place | None, Place]]  # (caller, callee) of each call; caller None: outside slurmgen

    def report(self) -> str:
        returns = len(self.files) - len(set(self.files))
        return f"the end's walk: {len(set(self.files))} files, {returns} returns to a file left\n  " + "\n  ".join(
            sorted(set(self.files))
        )


def place_of(frame: FrameType | None) -> Place | None:
    if frame is None or not frame.f_code.co_filename.startswith(str(PACKAGE) + os.sep):
        return None
    return os.path.relpath(frame.f_code.co_filename, PACKAGE), frame.f_code.co_name


def walk(rc: int, env: dict[str, str], job: OneJob) -> Walk:
    """Run `end` as main does and record every call it makes into slurmgen's files."""
    client = job.client()
    files: list[str] = []
    calls: list[tuple[Place | None, Place]] = []

    def seen(frame: FrameType, event: str, arg: object) -> None:
        # A function's code has its own locals (CO_NEWLOCALS); a module's or a class's body, run by an import, not.
        body = not frame.f_code.co_flags & inspect.CO_NEWLOCALS
        here = place_of(frame)
        if event == "call" and not body and here is not None:
            if not files or files[-1] != here[0]:
                files.append(here[0])
            calls.append((place_of(frame.f_back), here))

    ctx = JobContext.from_environ(env)  # as main does: the context is read once, before `end`
    sys.setprofile(seen)
    try:
        code = batch.end(rc, ctx, lambda line: None, client)
    finally:
        sys.setprofile(None)
    return Walk(code, files, calls)


def rule_place(rule: object) -> Place:
    code = rule.__code__  # type: ignore[attr-defined]
    return os.path.relpath(code.co_filename, PACKAGE), code.co_name


def test_the_end_of_a_preempted_run_asks_the_policy_through_its_entry_point(tmp_path: Path) -> None:
    realistic_run(tmp_path)
    job = OneJob(preempt_time=PREEMPT_TIME)
    found = walk(143, env_for(tmp_path, SLURMGEN_SIGNALS="USR1@5.0 TERM@9.0"), job)
    print(found.report())
    assert found.code == 0 and job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]  # the walk did its work
    answering = {rule_place(rule) for rule in rules().values()}
    asked = [(caller, callee) for caller, callee in found.calls if callee in answering]
    assert {callee for _, callee in asked} >= {rule_place(decide_end), rule_place(settle)}
    assert [(caller, callee) for caller, callee in asked if caller != ENTRY] == []
