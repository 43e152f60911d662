"""`slurmgen run --local`: plan, record, run, report. The CLI passes `out` (its stderr printer) and the
environment; everything here raises slurmgen errors for the CLI's one error boundary."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen import run_history
from slurmgen.errors import UsageError
from slurmgen.exit_codes import EXIT_REHEARSAL_MISSED
from slurmgen.journal import home
from slurmgen.local import jobenv, local_jobs, rehearse, setup
from slurmgen.local.runner import LocalJob, Runner
from slurmgen.queries.logs import label
from slurmgen.slurm.ids import local_label, parse_local_id
from slurmgen.spec.model import JobSpec

TAIL_LINES = 15


def _devices() -> list[str]:
    try:
        return os.listdir("/dev")
    except OSError:
        return []


def command(
    spec: Path | None,
    job: str | None,
    sig: str | None,
    options: setup.Options,
    out: Callable[[str], object],
) -> int:
    """`slurmgen run`: the argument checks, then a local run or a signal to one. Returns the exit code."""
    if sig is not None or job is not None:
        if sig is None or job is None or spec is not None:
            raise UsageError("signal a running local job with: slurmgen run --job ID --signal SIG")
        return signal_local(job, sig, out)
    if spec is None:
        raise UsageError("give the job spec: slurmgen run job.yaml")
    return run_local(spec, options, out)


def run_local(
    source: Path,
    options: setup.Options,
    out: Callable[[str], object],
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run the spec on this machine; returns the job's exit code. `clock` times Slurm's signals and KillWait
    (tests run it faster)."""
    env = dict(os.environ if environ is None else environ)
    submit_dir = (cwd or Path.cwd()).resolve()
    loaded = setup.load(source, options, jobenv.visible_gpus(env, _devices()), submit_dir)
    for warning in loaded.warnings:
        out(f"warning: {warning}")
    spec = loaded.spec
    if spec.array or spec.sweep:  # every task as a job of its own (slurmgen.local.array)
        from slurmgen.local.array import run_array

        # The rehearsals act on one job's ranks and nodes; an array's tasks are jobs of their own, so they are
        # refused here rather than dropped on the way to each task.
        given = [name for name, value in (("--preempt-after", options.preempt_after),
                                          ("--preempt-at-step", options.preempt_at_step),
                                          (f"--{(options.rehearse or ('',))[0]}-rank", options.rehearse),
                                          ("--bad-node", options.bad_node)) if value is not None]  # fmt: skip
        if given:
            kind = "sweep" if spec.sweep else "array"
            raise UsageError(
                f"{' and '.join(given)}: a rehearsal of one job, and {source} is a{'n' if kind == 'array' else ''} "
                f"{kind} (every task a job of its own); rehearse on a spec without `{kind}:`"
            )
        return run_array(source, spec, options, out, env, submit_dir, loaded.notes)
    base = home(env, submit_dir)
    try:
        job_id = setup.new_job_id(
            base, setup.id_taken(spec, base, submit_dir), setup.state_claim(spec, base, submit_dir)
        )
    except OSError as exc:
        where = exc.filename or base / "local"
        raise UsageError(f"cannot record a local job in {where}: {exc.strerror or exc}") from None
    paths = setup.paths(spec, job_id, base, submit_dir)
    shape = _shape(spec, job_id, submit_dir, loaded.gpus)
    job = LocalJob(spec, loaded.script, paths, shape, options.preempt_after, options.rehearse, options.bad_node,
                   options.step_moments(), options.step_wait)  # fmt: skip
    return _start(job, source, options, base, loaded.notes, env, out, clock)


def _shape(spec: JobSpec, job_id: str, submit_dir: Path, gpus: tuple[tuple[str, ...], ...] | None) -> jobenv.JobShape:
    return jobenv.JobShape(
        job_id=job_id,
        name=spec.name,
        nodes=spec.nodes + spec.recovery.spare_nodes,  # the allocation: the spares too (sbatch --nodes)
        tasks_per_node=spec.tasks_per_node,
        cpus_per_task=spec.cpus_per_task,
        submit_dir=str(submit_dir),
        submit_host=socket.gethostname(),
        gpus=gpus,
    )


def _start(
    job: LocalJob,
    source: Path,
    options: setup.Options,
    base: Path,
    notes: tuple[str, ...],
    env: Mapping[str, str],
    out: Callable[[str], object],
    clock: Callable[[], float],
    restart: int = 0,
) -> int:
    """Run the job (a new one, or a resumed one from run `restart + 1` on), recording it in the local journal."""
    spec, paths, job_id = job.spec, job.paths, job.shape.job_id
    submit_dir = Path(job.shape.submit_dir)
    runner = Runner(job, env, out, clock=clock)
    runner.runs = restart
    for note in notes:
        runner.say(note)
    ranks = _plural(spec.nproc_per_node, "worker" if spec.per_node_launcher else "task")
    runner.say(
        f"{spec.name}, {_plural(spec.nodes, 'node')} x {ranks} on {jobenv.nodelist(job.shape.nodes)} "
        f"({spec.distributed.backend}); batch log {label(paths.batch_log, submit_dir)}, task logs "
        f"{label(paths.task_logs, submit_dir)}/rank-<N>.log and <node>.log"
    )
    named = local_label(job_id)
    runner.say(f"its id is {named}: slurmgen status/logs/history/cancel/resume {named}")
    if options.preempt_after is not None:
        when = f"{options.preempt_after:g} s"
        runner.say(f"preemption rehearsal: SIG{spec.preemption.signal} to the batch shell at {when} of run 1")
    if options.preempt_at_step is not None:
        runner.say(f"preemption rehearsal: SIG{spec.preemption.signal} to the batch shell once rank 0's program is at "
                   f"step {options.preempt_at_step} in run 1 (waiting at most {options.step_wait:g} s)")  # fmt: skip
    if options.rehearse is not None:
        what, rank, after = options.rehearse
        when = (f"{after:g} s of run 1" if after is not None else
                f"step {options.rehearse_at_step} of rank 0's program in run 1 (waiting at most "
                f"{options.step_wait:g} s)")  # fmt: skip
        runner.say(f"{what} rehearsal: {'SIGKILL' if what == 'kill' else 'SIGSTOP'} to rank {rank}'s program at "
                   f"{when}")  # fmt: skip
    # A journal of their own: the submission journal's ids are Slurm's, and status/cancel/requeue act on them
    # on the cluster, where local job 3 is someone else's job 3.
    record = local_jobs.recorder(local_jobs.journal(base), source, spec.name, paths, job_id)
    given = {"nodes": options.nodes, "tasks_per_node": options.tasks_per_node, "overrides": list(options.overrides),
             "templates": options.templates, "submit_dir": str(submit_dir), "args": list(options.args)}  # fmt: skip
    given_args: dict[str, object] = {"args": list(options.args)} if options.args else {}  # as a journal entry
    record("RUNNING", runner_pid=os.getpid(), nodes=job.shape.nodes, tasks_per_node=spec.nproc_per_node, options=given,
           **given_args)  # fmt: skip
    started = time.monotonic()
    try:
        end = runner.run(restart)
    except OSError as exc:  # the output or state directory cannot be written: nothing was started
        where = f" {exc.filename}" if exc.filename else ""
        raise UsageError(f"cannot prepare the local job{where}: {exc.strerror or exc}") from None
    record(end.state, exit_code=end.code, runs=runner.runs)
    runner.say(
        f"{end.state}, exit code {end.code}, {_plural(runner.runs, 'run')} in {time.monotonic() - started:.1f} s; "
        f"batch log {label(paths.batch_log, submit_dir)}"
    )
    if end.state not in ("COMPLETED", "CANCELLED"):
        for line in _tail(paths.batch_log):
            out(f"  | {line}")
    missed = [] if end.state == "CANCELLED" else _missed_rehearsals(job, options, runner, end.state, started)
    for line in missed:
        runner.say(line)
    return EXIT_REHEARSAL_MISSED if missed and end.code == 0 else end.code


def _missed_rehearsals(job: LocalJob, options: setup.Options, runner: Runner, state: str, started: float) -> list[str]:
    """A line for each rehearsal asked for that never happened (slurmgen.local.rehearse.missed_lines)."""
    seconds = time.monotonic() - started
    lines = []
    if options.preempt_after is not None or options.preempt_at_step is not None:
        outcome = runner.rehearsed.get("preempt", rehearse.NOT_REACHED)
        option = (f"--preempt-after {options.preempt_after:g}" if options.preempt_after is not None
                  else f"--preempt-at-step {options.preempt_at_step}")  # fmt: skip
        lines += rehearse.missed_lines((option, "preempt"), outcome, state, seconds)
    if options.rehearse is not None:
        what, rank, after = options.rehearse
        outcome = runner.rehearsed.get("rank", rehearse.NOT_REACHED)
        at = f"--after {after:g}" if after is not None else f"--at-step {options.rehearse_at_step}"
        lines += rehearse.missed_lines((f"--{what}-rank {rank} {at}", what), outcome, state, seconds, rank)
    if options.bad_node is not None:
        node = jobenv.node_names(options.bad_node)[-1]
        outcome = rehearse.DONE if rehearse.bad_node_checked(str(job.paths.task_logs), node) else rehearse.NOT_REACHED
        lines += rehearse.missed_lines((f"--bad-node {options.bad_node}", "bad-node"), outcome, state, seconds)
    return lines


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _tail(path: Path) -> list[str]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return lines[-TAIL_LINES:]


def signal_local(job_id: str, sig: str, out: Callable[[str], object], environ: Mapping[str, str] | None = None) -> int:
    """Deliver a signal to a running local job's batch shell (SIGCONT first), as `--signal=B:` would."""
    from slurmgen.signal_names import require_signal_name

    name = require_signal_name(sig, "--signal")
    if name in ("KILL", "STOP"):
        raise UsageError(f"--signal {sig}: not a signal the batch shell can handle")
    number = parse_local_id(job_id) if not job_id.isdigit() else job_id
    if not (number and number.replace("_", "", 1).isdigit() and number.isascii()):
        raise UsageError(f"--job {job_id}: a local job id is local-N or N (printed when the job started)")
    base = home(dict(os.environ if environ is None else environ))
    # an array task (local-3_1) is a local job of its own number: its journal knows which
    control = local_jobs.find(base, number).control if "_" in number else base / local_jobs.LOCAL_DIR / number
    runner = local_jobs.send_signal(control, name)
    out(f"slurmgen: {local_label(number)}: SIG{name} delivered to the batch shell by its runner (pid {runner})")
    return 0


def resume_local(
    record: local_jobs.LocalRecord,
    out: Callable[[str], object],
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """`slurmgen resume local-<n>`: run a local job that ended before its work was done again, here, from its saved
    state: the script it ran, under its own id (its state, logs and run history continue), with SLURM_RESTART_COUNT
    one past its last run. Returns the job's exit code."""
    name = record.label
    if record.runner is not None:
        raise UsageError(f"{name} is RUNNING (runner pid {record.runner}): it has not ended, so nothing to resume")
    leftover = local_jobs.leftover_group(record.control)
    if leftover:
        raise UsageError(
            f"{name}: processes of its last run still run (process group {leftover}; its runner was killed); end "
            f"them first (kill -TERM -{leftover})"
        )
    given = record.entry.extra.get("options")
    if not isinstance(given, dict) or not given.get("submit_dir"):
        raise UsageError(f"{name} was recorded without how it was run (an older slurmgen); run the spec again")
    options = setup.Options(
        nodes=given.get("nodes"),
        tasks_per_node=given.get("tasks_per_node"),
        overrides=tuple(given.get("overrides") or ()),
        templates=given.get("templates"),
        args=tuple(given.get("args") or ()),
    )
    env = dict(os.environ if environ is None else environ)
    submit_dir = Path(given["submit_dir"])
    source = Path(record.entry.spec)
    loaded = setup.load(source, options, jobenv.visible_gpus(env, _devices()))
    try:
        script = Path(record.entry.script).read_text(encoding="utf-8")
    except OSError as exc:
        gone = f"{record.entry.script}: {exc.strerror or exc}"
        raise UsageError(f"the script {name} ran is gone ({gone}); run the spec again") from None
    notes = [f"resuming {name} ({record.state}) from its saved state: run {record.runs + 1}, the script it ran"]
    if script != loaded.script:
        notes.append(f"{source} renders another script now; {name} runs the one it ran ({record.entry.script})")
    base = record.control.parent.parent
    paths = setup.paths(loaded.spec, record.job_id, base, submit_dir)
    if record.state == "COMPLETED" and _last_ending(paths.task_logs) != "stopped":
        # A clean stop (USR2, the user's own signal) exits 0 too; the run history's run-end tells it apart.
        raise UsageError(f"{name} COMPLETED: its work is done and its state was removed; run the spec again")
    shape = _shape(loaded.spec, record.job_id, submit_dir, loaded.gpus)
    job = LocalJob(loaded.spec, script, paths, shape)
    if (paths.task_logs / "history").is_dir():
        # Credited to this command, as `slurmgen resume` credits a cluster requeue (slurmgen.queries.resume), before
        # the next run starts and would take the restart for someone else's.
        run_history.append(str(paths.task_logs), "resume", run_history.REQUEUE, record.runs, time.time())
    return _start(job, source, options, base, (*loaded.notes, *notes), env, out, clock, restart=record.runs)


def _last_ending(log_dir: Path) -> str | None:
    """How the job's last run ended, as its run history says (slurmgen.interruption: completed, stopped, ...)."""
    runs = run_history.History.load(str(log_dir)).runs()
    return runs[-1].ended if runs else None
