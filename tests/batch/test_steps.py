"""The job's steps (spec field steps, slurmgen/batch/steps.py) on a real run history in a directory: where a run
starts, when a step counts as done, and what the next step's decisions see of the steps before it."""

from __future__ import annotations

from pathlib import Path

from slurmgen import contract, run_history
from slurmgen.batch.steps import first_step, step_done
from slurmgen.job_context.context import JobContext


def context(
    tmp_path: Path, *, restarts: int = 0, preemption: bool = False, extra: dict[str, str] | None = None
) -> JobContext:
    env = {"SLURM_JOB_ID": "77", contract.LOG_DIR: str(tmp_path / "logs"), contract.STATE_DIR: str(tmp_path / "state"),
           contract.STEPS: "3", "SLURM_JOB_NODELIST": "node1", **(extra or {})}  # fmt: skip
    if preemption:
        env[contract.PREEMPT_SIGNAL] = "USR1"
    if restarts:
        env["SLURM_RESTART_COUNT"] = str(restarts)
    (tmp_path / "logs").mkdir(exist_ok=True)
    (tmp_path / "state").mkdir(exist_ok=True)
    return JobContext.from_environ(env)


def event(ctx: JobContext, kind: str, when: float, **fields: object) -> None:
    assert ctx.log_dir is not None
    run_history.append(ctx.log_dir, "test", kind, ctx.run, when, **fields)


def test_a_run_starts_at_the_first_step_no_run_completed(tmp_path: Path) -> None:
    first = context(tmp_path)
    assert first_step(first) == 0
    said: list[str] = []
    assert step_done(0, 0, first, said.append) == 0
    assert said[-1] == "step 1 of 3 completed; step 2 starts"
    second = context(tmp_path, restarts=1)  # requeued: the next run
    assert first_step(second) == 1
    assert step_done(1, 0, second, said.append) == 0
    assert step_done(2, 0, second, said.append) == 1  # the last: the run's end follows
    assert first_step(context(tmp_path, restarts=2)) == 3  # every step done
    runs = run_history.runs(run_history.read(str(tmp_path / "logs")))
    assert [(r.run, r.steps_done, r.steps) for r in runs] == [(first.run, [0], 3), (second.run, [1, 2], 3)]


def test_a_failed_step_or_one_that_exits_0_during_a_stop_is_not_done(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    said: list[str] = []
    assert step_done(0, 1, ctx, said.append) == 1
    event(ctx, run_history.STOP, 10.0, cause="preemption")  # rank 0 agreed a stop: the program saved, exited 0
    assert step_done(0, 0, ctx, said.append) == 1
    assert said == ["step 1 of 3 exited 0 during a stop (preemption): the run's end decides; a requeued run "
                    "starts at step 1 of 3 again"]  # fmt: skip
    assert first_step(ctx) == 0


def test_a_preemption_signal_the_program_handled_itself_keeps_the_step_undone(tmp_path: Path) -> None:
    """handler: program: the program saves and exits 0 on the signal; slurmgen records no stop, the signal says it."""
    ctx = context(tmp_path, preemption=True, extra={contract.SIGNALS: "USR1@12.5"})
    said: list[str] = []
    assert step_done(0, 0, ctx, said.append) == 1 and "during SIGUSR1" in said[0]


def test_the_next_step_sees_none_of_the_steps_before_it(tmp_path: Path) -> None:
    """Step 1 finished (rank 0's finish event) and had a restart; after it is done, step 2's decisions see neither,
    while the run's own facts (its start, its signals) stay."""
    ctx = context(tmp_path)
    event(ctx, run_history.RUN_START, 1.0, nodes="node1")
    event(ctx, run_history.RESTART, 2.0, cause="crash", who="rank 0")
    event(ctx, run_history.FINISHED, 3.0)
    said: list[str] = []
    assert step_done(0, 0, ctx, said.append) == 0
    event(ctx, run_history.TASK_EXIT, 99e9, rank=1, exit_code=3)  # step 2's own
    seen = run_history.History.load(ctx.log_dir).current_step(ctx.run)
    assert not seen.has(ctx.run, run_history.FINISHED) and not seen.of_run(ctx.run, run_history.RESTART)
    assert seen.has(ctx.run, run_history.RUN_START) and seen.has(ctx.run, run_history.TASK_EXIT)
