"""`slurmgen run` of a job array or a sweep: every task as its own emulated job, at most the array's `%` limit
(a sweep's max_parallel) at once, then one summary line per task and a total.

Each task runs in a child process (the local runner owns its process's signals and reaps its orphans, so one
runner per process), as Slurm runs each array task as a job of its own: its own job id and SLURM_JOB_ID, the
array's SLURM_ARRAY_JOB_ID (the first task's id), SLURM_ARRAY_TASK_ID/COUNT/MIN/MAX (sbatch(1) "OUTPUT
ENVIRONMENT VARIABLES"), and for a sweep SLURMGEN_SWEEP_ID, so the script picks the task's point.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slurmgen import contract
from slurmgen.errors import UsageError
from slurmgen.journal import home
from slurmgen.local import jobenv, local_jobs, setup
from slurmgen.local.local_jobs import KEY_EXTRA, PARAMS_EXTRA, POINT_EXTRA, SWEEP_EXTRA, VALUES_EXTRA
from slurmgen.local.runner import LocalJob, Runner
from slurmgen.queries.logs import label
from slurmgen.slurm.ids import local_label
from slurmgen.spec.model import JobSpec
from slurmgen.submission.sweep_plan import expand

POLL = 0.1


@dataclass(frozen=True)
class Task:
    """One array task as the child process gets it (JSON on its command line)."""

    source: str
    options: dict[str, Any]
    job_id: str
    array_job_id: str
    task_id: int
    count: int
    first: int
    last: int
    sweep_id: str | None
    submit_dir: str


def task_ids(spec: JobSpec) -> tuple[list[int], int | None]:
    """The task ids and the `%` limit: the sweep's points and max_parallel, or the spec's `array:`."""
    if spec.sweep is not None:
        return list(range(len(spec.sweep.points))), spec.sweep.max_parallel
    text = spec.array or ""
    limit = text.split("%", 1)[1] if "%" in text else ""
    try:
        ids = expand(text)
    except ValueError:
        raise UsageError(f"array: {text!r} is not an array range (e.g. 0-15%4)") from None
    return ids, int(limit) if limit.isdigit() and int(limit) > 0 else None


def task_job_ids(spec: JobSpec, count: int, base: Path, submit_dir: Path) -> list[str]:
    """A local job id for each task. Each task is a local job of its own: it claims its id in a shared state
    directory as a single job does, so another checkout's task with the same id never resumes this one's state."""
    taken = setup.id_taken(spec, base, submit_dir)
    claim = setup.state_claim(spec, base, submit_dir)
    return [setup.new_job_id(base, taken, claim) for _ in range(count)]


def run_array(
    source: Path,
    spec: JobSpec,
    options: setup.Options,
    out: Callable[[str], object],
    env: Mapping[str, str],
    submit_dir: Path,
    notes: tuple[str, ...] = (),
) -> int:
    """Every task, at most ``limit`` at once; returns 0 when every task completed, else the first failure's code.
    ``notes`` (slurmgen.local.setup.LocalSetup) are said once for the whole array, not by every task."""
    ids, limit = task_ids(spec)
    base = home(env, submit_dir)
    job_ids = task_job_ids(spec, len(ids), base, submit_dir)
    array_job = job_ids[0]
    sweep_id = f"{spec.name}-local-{array_job}" if spec.sweep is not None else None
    named = sweep_id or local_label(array_job)  # the id status, logs --point, history and cancel take
    what = f"sweep {named}" if sweep_id else f"array {named}"
    out(f"slurmgen: {what}: {len(ids)} task(s), at most {limit or len(ids)} at once; slurmgen status {named}")
    for note in notes:
        out(f"slurmgen: {what}: {note}")
    opts = {"nodes": options.nodes, "tasks_per_node": options.tasks_per_node, "overrides": list(options.overrides),
            "templates": options.templates, "args": list(options.args)}  # fmt: skip
    waiting = [
        Task(str(source), opts, job_id, array_job, t, len(ids), min(ids), max(ids), sweep_id, str(submit_dir))
        for job_id, t in zip(job_ids, ids, strict=True)
    ]
    running: dict[int, tuple[Task, subprocess.Popen[bytes]]] = {}
    ended: list[tuple[Task, int]] = []
    child_env = dict(env)
    try:
        while waiting or running:
            while waiting and len(running) < (limit or len(ids)):
                task = waiting.pop(0)
                argv = [sys.executable, "-m", "slurmgen.local.array", json.dumps(task.__dict__)]
                proc = subprocess.Popen(argv, env=child_env, cwd=submit_dir)
                running[task.task_id] = (task, proc)
            for tid, (task, proc) in list(running.items()):
                code = proc.poll()
                if code is not None:
                    del running[tid]
                    ended.append((task, code))
            time.sleep(POLL)
    finally:
        for _task, proc in running.values():  # Ctrl-C: each child's runner ends its own job on SIGTERM
            proc.terminate()
        for _task, proc in running.values():
            proc.wait()
    return summary(spec, sorted(ended, key=lambda e: e[0].task_id), out)


def summary(spec: JobSpec, ended: list[tuple[Task, int]], out: Callable[[str], object]) -> int:
    for task, code in ended:
        values = f" {spec.sweep.shown(task.task_id)}" if spec.sweep is not None else ""
        state = "COMPLETED" if code == 0 else "FAILED"
        out(f"slurmgen: task {local_label(f'{task.array_job_id}_{task.task_id}')}{values}: {state}, exit code {code}")
    failed = [code for _task, code in ended if code != 0]
    out(f"slurmgen: {len(ended)} task(s): {len(ended) - len(failed)} completed, {len(failed)} failed")
    return failed[0] if failed else 0


def run_task(task: Task, out: Callable[[str], object]) -> int:
    """One array task as a local job of its own (the child process)."""
    env = dict(os.environ)
    options = setup.Options(
        task.options["nodes"], task.options["tasks_per_node"], tuple(task.options["overrides"]), None,
        task.options["templates"], args=tuple(task.options.get("args") or ()),
    )  # fmt: skip
    submit_dir = Path(task.submit_dir)
    loaded = setup.load(task.source, options, jobenv.visible_gpus(env, os.listdir("/dev")))
    spec = loaded.spec
    base = home(env, submit_dir)
    key = f"{task.array_job_id}_{task.task_id}"
    plain = setup.paths(spec, task.job_id, base, submit_dir)
    from slurmgen.script.directives import batch_log, task_log_stem

    paths = replace(
        plain,
        batch_log=plain.workdir / batch_log(spec).replace("%A", task.array_job_id).replace("%a", str(task.task_id)),
        task_logs=plain.workdir / f"{task_log_stem(spec)}-{key}",
    )
    shape = jobenv.JobShape(
        job_id=task.job_id,
        name=spec.name,
        nodes=spec.nodes + spec.recovery.spare_nodes,  # the allocation: the spares too
        tasks_per_node=spec.tasks_per_node,
        cpus_per_task=spec.cpus_per_task,
        submit_dir=str(submit_dir),
        submit_host=socket.gethostname(),
        gpus=loaded.gpus,
    )
    runner = ArrayTaskRunner(LocalJob(spec, loaded.script, paths, shape), env, out)
    runner.task = task
    runner.say(f"batch log {label(paths.batch_log, submit_dir)}")
    # The local journal, as for a plain local run (slurmgen.local.command): without it, status, logs, history
    # and cancel cannot find the task, its array or its sweep afterwards.
    record = local_jobs.recorder(local_jobs.journal(base), Path(task.source), spec.name, paths, task.job_id)
    given = {**task.options, "submit_dir": task.submit_dir}
    point: dict[str, object] = {KEY_EXTRA: key}
    if task.sweep_id is not None and spec.sweep is not None:
        shown, params = spec.sweep.shown(task.task_id), dict(spec.sweep.values(task.task_id))
        point.update({SWEEP_EXTRA: task.sweep_id, POINT_EXTRA: task.task_id, VALUES_EXTRA: shown, PARAMS_EXTRA: params})
    record("RUNNING", runner_pid=os.getpid(), nodes=shape.nodes, tasks_per_node=spec.nproc_per_node, options=given,
           **point)  # fmt: skip
    end = runner.run()
    record(end.state, exit_code=end.code, runs=runner.runs)
    return end.code


class ArrayTaskRunner(Runner):
    task: Task

    @property
    def label(self) -> str:
        """`local-<array>_<task>`, as Slurm names an array task by its array's id."""
        return local_label(f"{self.task.array_job_id}_{self.task.task_id}")

    def env(self, restart: int) -> dict[str, str]:
        env = super().env(restart)
        t = self.task
        env.update(
            {
                "SLURM_ARRAY_JOB_ID": t.array_job_id,
                "SLURM_ARRAY_TASK_ID": str(t.task_id),
                "SLURM_ARRAY_TASK_COUNT": str(t.count),
                "SLURM_ARRAY_TASK_MIN": str(t.first),
                "SLURM_ARRAY_TASK_MAX": str(t.last),
            }
        )
        if t.sweep_id is not None:
            env[contract.SWEEP_ID] = t.sweep_id
            env[contract.SWEEP_OFFSET] = "0"  # no MaxArraySize here: one array holds every point
        return env


def main(argv: list[str] | None = None) -> int:
    from slurmgen.errors import SlurmgenError, error_lines

    args = sys.argv[1:] if argv is None else argv
    task = Task(**json.loads(args[0]))
    try:
        return run_task(task, lambda line: print(line, file=sys.stderr, flush=True))
    except SlurmgenError as exc:
        for line in error_lines(exc):
            print(line, file=sys.stderr, flush=True)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
