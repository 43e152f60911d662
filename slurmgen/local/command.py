"""`slurmgen run --local`: plan, record, run, report. The CLI passes `out` (its stderr printer) and the
environment; everything here raises slurmgen errors for the CLI's one error boundary."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.jobs.journal import Entry, Journal, home
from slurmgen.jobs.logs import label
from slurmgen.local import jobenv, setup
from slurmgen.local.runner import LocalJob, Runner, send_signal

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
            raise UsageError("signal a running local job with: slurmgen run --local --job ID --signal SIG")
        return signal_local(job, sig, out)
    if spec is None:
        raise UsageError("give the job spec: slurmgen run --local job.yaml")
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
    loaded = setup.load(source, options, jobenv.visible_gpus(env, _devices()))
    for warning in loaded.warnings:
        out(f"warning: {warning}")
    spec = loaded.spec
    base = home(env, submit_dir)
    try:
        job_id = setup.new_job_id(base, setup.id_taken(spec, base, submit_dir))
    except OSError as exc:
        raise UsageError(f"cannot record a local job in {base / 'local'}: {exc.strerror or exc}") from None
    paths = setup.paths(spec, job_id, base, submit_dir)
    shape = jobenv.JobShape(
        job_id=job_id,
        name=spec.name,
        nodes=spec.nodes,
        tasks_per_node=spec.tasks_per_node,
        cpus_per_task=spec.cpus_per_task,
        submit_dir=str(submit_dir),
        submit_host=socket.gethostname(),
        gpus=loaded.gpus,
    )
    job = LocalJob(spec, loaded.script, paths, shape, options.preempt_after, options.rehearse)
    runner = Runner(job, env, out, clock=clock)
    for note in loaded.notes:
        runner.say(note)
    ranks = _plural(spec.nproc_per_node, "worker" if spec.launcher == "torchrun" else "task")
    runner.say(
        f"{spec.name}, {_plural(spec.nodes, 'node')} x {ranks} on {jobenv.nodelist(spec.nodes)} "
        f"({spec.distributed.backend}); batch log {label(paths.batch_log, submit_dir)}, task logs "
        f"{label(paths.task_logs, submit_dir)}/rank-<N>.log and <node>.log"
    )
    if options.preempt_after is not None:
        when = f"{options.preempt_after:g} s"
        runner.say(f"preemption rehearsal: SIG{spec.preemption.signal} to the batch shell at {when} of run 1")
    if options.rehearse is not None:
        what, rank, after = options.rehearse
        runner.say(f"{what} rehearsal: {'SIGKILL' if what == 'kill' else 'SIGSTOP'} to rank {rank}'s program at "
                   f"{after:g} s of run 1")  # fmt: skip
    # A journal of their own: the submission journal's ids are Slurm's, and status/cancel/requeue act on them
    # on the cluster, where local job 3 is someone else's job 3.
    journal = Journal(base / "local")
    record = _recorder(journal, source, spec.name, paths, job_id)
    record("RUNNING", runner_pid=os.getpid(), nodes=spec.nodes, tasks_per_node=spec.nproc_per_node)
    started = time.monotonic()
    try:
        end = runner.run()
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
    return end.code


def _recorder(journal: Journal, source: Path, name: str, paths: setup.Paths, job_id: str) -> Callable[..., None]:
    def record(state: str, **extra: object) -> None:
        journal.append(
            Entry(
                event="local",
                token=f"local-{job_id}",
                name=name,
                spec=str(Path(source).resolve()),
                run_dir=str(paths.control),
                script=str(paths.script),
                time=time.time(),
                job_id=job_id,
                cluster=jobenv.CLUSTER_NAME,
                log_dir=str(paths.batch_log.parent),
                extra={"state": state, **extra},
            )
        )

    return record


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
    if not (job_id.isdigit() and job_id.isascii()):
        raise UsageError(f"--job {job_id}: a local job id is a number (printed when the job started)")
    control = home(dict(os.environ if environ is None else environ)) / "local" / job_id
    runner = send_signal(control, name)
    out(f"slurmgen: local job {job_id}: SIG{name} delivered to the batch shell by its runner (pid {runner})")
    return 0
