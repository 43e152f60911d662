"""`slurmgen run --local`: plan, record, run, report. The CLI passes `out` (its stderr printer) and the
environment; everything here raises slurmgen errors for the CLI's one error boundary."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from slurmgen import contract
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
    resume: str | None = None,
) -> int:
    """`slurmgen run`: the argument checks, then a local run, a signal to one, or a resume of one. Returns the exit
    code."""
    if resume is not None:
        if sig is not None or job is not None:
            raise UsageError("resume a local job with: slurmgen run --local --resume ID [SPEC]")
        return resume_local(resume, spec, options, out)
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
    job = LocalJob(spec, loaded.script, paths, shape, options.preempt_after)
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
    # A journal of their own: the submission journal's ids are Slurm's, and status/cancel/requeue act on them
    # on the cluster, where local job 3 is someone else's job 3.
    journal = Journal(base / "local")
    record = _recorder(journal, source, spec.name, paths, job_id)
    record("RUNNING", runner_pid=os.getpid(), nodes=spec.nodes, tasks_per_node=spec.nproc_per_node,
           options=_options_record(options), resumes=env.get(contract.RESUME_FROM))  # fmt: skip
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


def _options_record(options: setup.Options) -> dict[str, object]:
    """What a resume needs to build the same spec again (the spec hash must match for the state to be taken)."""
    return {"nodes": options.nodes, "tasks_per_node": options.tasks_per_node, "overrides": list(options.overrides),
            "templates": options.templates}  # fmt: skip


def resume_local(
    job_id: str,
    spec: Path | None,
    options: setup.Options,
    out: Callable[[str], object],
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    """`slurmgen run --local --resume ID`: what `slurmgen resume` does for a job Slurm has forgotten, on this
    machine: the spec runs again, as local job ID ran it (its options, unless new ones are given), as a new local
    job that starts from job ID's last saved state (SLURMGEN_RESUME_FROM; the runtime takes it only for the same
    spec). A local job that is still running has nothing to resume."""
    if not (job_id.isdigit() and job_id.isascii()):
        raise UsageError(f"--resume {job_id}: a local job id is a number (printed when the job started)")
    env = dict(os.environ if environ is None else environ)
    submit_dir = (cwd or Path.cwd()).resolve()
    entries = [e for e in Journal(home(env, submit_dir) / "local").entries() if e.job_id == job_id]
    if not entries:
        raise UsageError(f"--resume {job_id}: no local job {job_id} was run from here (slurmgen run --local SPEC)")
    last, first = entries[-1], entries[0]
    state = str(last.extra.get("state", "?"))
    if state == "RUNNING" and _alive(first.extra.get("runner_pid")):
        raise UsageError(f"--resume {job_id}: local job {job_id} is still running, so there is nothing to resume")
    recorded = first.extra.get("options") or {}
    if options == setup.Options() and isinstance(recorded, dict):
        options = setup.Options(
            nodes=recorded.get("nodes"),
            tasks_per_node=recorded.get("tasks_per_node"),
            overrides=tuple(recorded.get("overrides") or ()),
            templates=recorded.get("templates"),
        )
    source = spec or Path(last.spec)
    out(f"slurmgen: local job {job_id} ended {state}: running {label(source, submit_dir)} again as a new local job, "
        f"from job {job_id}'s last saved state")  # fmt: skip
    env[contract.RESUME_FROM] = job_id
    return run_local(source, options, out, env, cwd)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
