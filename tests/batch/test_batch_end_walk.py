"""How far the batch shell's end walks: from the step's exit code to the job's, how many of slurmgen's source files
does `python3 -m slurmgen.batch end RC` run code in, and how often does it come back to a file it had left? Measured,
not guessed: `end` (the function the entry point calls, handed the context the entry point read once) runs
in-process under sys.setprofile on a realistic run directory (a preempted run whose program saved on the preemption
signal and exited 143, the site record and a resume state), and every function call in a slurmgen file is
collected, in order. Module and class bodies run by an import are not counted: the walk is the calls.

The end may cross at most 8 files, and the walk is there: the batch shell (commands), the policy (interruption: its
entry point, and ending, which also holds the requeue's route and the rank that failed among its casualties),
the run history, the trust rule every file read back passes (trust.py), requeue (which carries out the route,
and asks Slurm what it says about the job, retried), and the Slurm query (slurm: client, which asks and parses
`scontrol show job`, and ids, the words Slurm prints for an id, a state and a value). The bounds keep it from
growing (17 files before the policy became one package, 19 with the trust rule and the casualty rule, 16 once the
context was read at the entry point, 15 with the stop path's retry in its own module, 14 with the value words in
their own, 13 with the run number a field of the context and `end` and the requeue taking the context they are
handed, 8 with the end's rules one module of the policy, Slurm's view of the job the requeue's, `scontrol show
job` parsed where it is asked and the value words with the other words; 97 returns to 83 with the site's facts
read once per end, not again by the requeue, to 70 with the end, the requeue and the view taking the policy's
names from the module that defines them, not through the package's lazy names, and one check of the job id per
`show job`, to 67 with class bodies run by an import no longer counted as calls, and to 54 with 8 files); lower
them as the walk shrinks."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from types import FrameType

from slurmgen import run_history
from slurmgen.batch import commands as batch
from slurmgen.job_context.context import JobContext

from .test_batch import PREEMPT_TIME, OneJob, env_for

END_WALK_FILES = 8
END_WALK_RETURNS = 54
PACKAGE = Path(batch.__file__).resolve().parents[1]


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


def walk(rc: int, env: dict[str, str], job: OneJob) -> tuple[int, list[str], int]:
    """The exit code, the files the walk runs code in, and its returns: how often it enters a file it had left."""
    client = job.client()
    path: list[str] = []  # the files in the order the walk enters them, one entry per entry

    def seen(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        # A function's code has its own locals (CO_NEWLOCALS); a module's or a class's body, run by an import, not.
        body = not frame.f_code.co_flags & inspect.CO_NEWLOCALS
        if event == "call" and not body and name.startswith(str(PACKAGE) + os.sep):
            here = os.path.relpath(name, PACKAGE)
            if not path or path[-1] != here:
                path.append(here)

    ctx = JobContext.from_environ(env)  # as main does: the context is read once, before `end`
    sys.setprofile(seen)
    try:
        code = batch.end(rc, ctx, lambda line: None, client)
    finally:
        sys.setprofile(None)
    return code, sorted(set(path)), len(path) - len(set(path))


def test_the_end_of_a_preempted_run_crosses_few_files(tmp_path: Path) -> None:
    realistic_run(tmp_path)
    job = OneJob(preempt_time=PREEMPT_TIME)
    code, files, returns = walk(143, env_for(tmp_path, SLURMGEN_SIGNALS="USR1@5.0 TERM@9.0"), job)
    assert code == 0 and job.requeues == [["scontrol", "requeue", "Incomplete", "77"]]  # the walk did its work
    assert len(files) <= END_WALK_FILES, "\n".join(files)
    assert returns <= END_WALK_RETURNS, returns
    assert [f for f in files if f.startswith("interruption")] == [
        "interruption/__init__.py",  # the one entry point
        "interruption/ending.py",  # the end, the requeue's route, the rank that failed among its casualties
    ]
