"""The local run, planned: the spec as it runs here, the rendered script, a job id, where files go, and when
Slurm's signals come. Loading and rendering are the same as `slurmgen render`; the effects are small and named.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmgen import contract, trust
from slurmgen.errors import Problem, SpecError, UsageError
from slurmgen.local import jobenv
from slurmgen.local.step_watch import DEFAULT_WAIT, StepMoment, unknown_progress
from slurmgen.script.build import build, check
from slurmgen.script.directives import batch_log, task_log_stem
from slurmgen.spec import secrets
from slurmgen.spec.load import read_spec
from slurmgen.spec.model import JobSpec
from slurmgen.spec.profile import ClusterProfile


@dataclass(frozen=True)
class Options:
    nodes: int | None = None
    tasks_per_node: int | None = None
    overrides: tuple[str, ...] = ()
    preempt_after: float | None = None
    templates: str | None = None
    # --kill-rank R --after S or --hang-rank R --after S (slurmgen.local.rehearse): (what, rank, seconds); with
    # --at-step N instead of --after: (what, rank, None) and rehearse_at_step N
    rehearse: tuple[str, int, float | None] | None = None
    bad_node: int | None = None  # --bad-node N: emulated node N (1 is the first) fails its checks
    profile: ClusterProfile | None = None  # --cluster NAME: its defaults go under the spec, as on that cluster
    args: tuple[str, ...] = ()  # given after `--`: they go after the spec's command
    # the step rehearsals (slurmgen.local.step_watch): --preempt-at-step N, --at-step N, --step-wait S
    preempt_at_step: int | None = None
    rehearse_at_step: int | None = None
    step_wait: float = DEFAULT_WAIT

    def step_moments(self) -> tuple[StepMoment, ...]:
        """The rehearsals timed by rank 0's progress, the lower step first."""
        found = []
        if self.preempt_at_step is not None:
            found.append(StepMoment("preempt", self.preempt_at_step, f"--preempt-at-step {self.preempt_at_step}"))
        if self.rehearse is not None and self.rehearse_at_step is not None:
            what, rank = self.rehearse[:2]
            found.append(StepMoment("rehearse", self.rehearse_at_step,
                                    f"--{what}-rank {rank} --at-step {self.rehearse_at_step}"))  # fmt: skip
        return tuple(sorted(found, key=lambda m: m.step))


@dataclass(frozen=True)
class LocalSetup:
    spec: JobSpec
    script: str
    warnings: tuple[Problem, ...]
    notes: tuple[str, ...]  # how the spec was adapted to this machine, then the spec's own notes, one line each
    gpus: tuple[tuple[str, ...], ...] | None


def _tasks_field(spec: JobSpec) -> str:
    return "nproc_per_node" if spec.per_node_launcher else "tasks_per_node"


def adapt(spec: JobSpec, gpus: Sequence[str]) -> tuple[list[str], list[str], tuple[tuple[str, ...], ...] | None]:
    """Overrides that let the spec run here, the note saying so, and each node's GPUs (None: a CPU run).

    GPUs are used when this machine has enough for every emulated node; otherwise the job runs on CPU with
    gloo, keeping one task (or torchrun worker) per former GPU, so ranks and world size stay as on the cluster.
    """
    if spec.gpus_per_node == 0:
        return [], [], None
    slices = jobenv.gpu_slices(gpus, spec.nodes, spec.gpus_per_node)
    if slices is not None:
        return [], [], slices
    per_node = spec.nproc_per_node
    unit = ("worker" if spec.per_node_launcher else "task") + ("" if per_node == 1 else "s")
    have = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} here" if gpus else "no GPU here"
    note = (
        f"{have}, {spec.nodes * spec.gpus_per_node} needed: running on CPU with gpus_per_node=0 and "
        f"distributed.backend=gloo, keeping {per_node} {unit} "
        "per node"
    )
    sets = ["gpus_per_node=0", "distributed.backend=gloo", f"{_tasks_field(spec)}={per_node}"]
    return sets, [note], None


def load(source: str | Path, options: Options, gpus: Sequence[str], submit_dir: Path | None = None) -> LocalSetup:
    """Load with the user's overrides (`--nodes`/`--tasks-per-node` are `--set`s), adapt, render: the compile step
    of `slurmgen render` (slurmgen.script.build), so a local run warns as render does. ``submit_dir``: where the
    job starts from (default: the current directory)."""
    raw = read_spec(source)  # once: the adapted spec is checked from the same bytes
    where = Path.cwd() if submit_dir is None else submit_dir
    sets = list(options.overrides)
    if options.nodes is not None:
        sets.append(f"nodes={options.nodes}")
    first = check(raw, str(source), sets, where, options.profile, options.args)
    extra, notes, slices = adapt(first.spec, gpus)
    if options.tasks_per_node is not None:
        extra.append(f"{_tasks_field(first.spec)}={options.tasks_per_node}")
    checked = check(raw, str(source), sets + extra, where, options.profile, options.args) if extra else first
    spec = checked.spec
    _refuse_missing_script(spec, raw, str(source), where)
    if (absent := secrets.missing(spec.env, os.environ)) is not None:
        raise UsageError(f"{source}: {absent}")  # the local job gets this environment, as sbatch would pass it
    if spec.nodes > jobenv.MAX_NODES:
        raise UsageError(f"--nodes {spec.nodes}: a local run emulates at most {jobenv.MAX_NODES} nodes")
    tasks = (
        (spec.nodes + spec.recovery.spare_nodes)
        * spec.tasks_per_node
        * (spec.nproc_per_node if spec.per_node_launcher else 1)
    )
    if tasks > (cap := local_task_cap()):
        raise UsageError(
            f"{source}: {spec.nodes} node(s) x {spec.world_size // max(spec.nodes, 1)} task(s) is {tasks} local "
            f"processes; this machine runs at most {cap} ({TASKS_PER_CPU} per CPU, {os.cpu_count() or 1} CPUs, "
            "within the process limit); lower --nodes or --tasks-per-node"
        )
    if options.preempt_after is not None:
        if options.preempt_after <= 0:
            raise UsageError(f"--preempt-after {options.preempt_after:g}: want a number of seconds above 0")
        if not spec.preemption.enabled:
            raise UsageError(f"{source}: preemption is off in this spec, so there is no preemption to rehearse")
    if options.preempt_at_step is not None and not spec.preemption.enabled:
        raise UsageError(f"{source}: preemption is off in this spec, so there is no preemption to rehearse")
    if options.rehearse is not None:
        what, rank, after = options.rehearse
        if not 0 <= rank < spec.world_size:
            raise UsageError(f"--{what}-rank {rank}: the job has ranks 0 to {spec.world_size - 1}")
        if after is not None and after <= 0:
            raise UsageError(f"--after {after:g}: want a number of seconds above 0")
    for moment in options.step_moments():
        if moment.step <= 0:
            raise UsageError(f"{moment.option}: want a step above 0 (rank 0's program's step, as it counts them)")
        if why := unknown_progress(spec, str(source), where / spec.chdir if spec.chdir else where, moment.option):
            raise UsageError(why)
    if options.step_wait <= 0:
        raise UsageError(f"--step-wait {options.step_wait:g}: want a number of seconds above 0")
    if options.bad_node is not None:
        _check_bad_node(spec, options.bad_node, str(source))
    if slices is None:  # on CPU: a program written for CUDA only is said first (slurmgen.local.cuda_only)
        from slurmgen.local.cuda_only import cuda_only_note

        cuda = cuda_only_note(spec, where / spec.chdir if spec.chdir else where)
        notes[:0] = [cuda] if cuda else []
    if spec.dependency:
        notes.append(f"dependency {spec.dependency} is ignored locally: the job starts at once")
    if spec.container is not None and spec.container.runtime == "pyxis":
        notes.append(f"the image {spec.container.image} is not used locally: tasks run on this machine, its files")
    elif spec.container is not None:  # apptainer and enroot are plain commands: they run here as on a node
        notes.append(f"tasks run in {spec.container.image} through {spec.container.runtime}, which must work here")
    built = build(checked, options.templates)
    # then the spec's own notes, as render and submit say them (a lead time cut to fit a short limit); a program
    # that cannot run here stays the first line
    return LocalSetup(spec, built.script, built.warnings, (*notes, *map(str, built.notes)), slices)


def _refuse_missing_script(spec: JobSpec, raw: bytes, source: str, submit_dir: Path) -> None:
    """The job runs here, now: a script that is not where it runs is an error before anything starts, not the
    warning `validate` gives for a cluster (where the file may appear before the job starts). Without this, run 1
    failed, was restarted, and failed again some 17 lines later, the cause far above. `setup:` lines may fetch or
    create the file, or change directory, so with them it stays a warning."""
    from slurmgen.spec.where import missing_script

    if spec.setup:
        return
    line = next((n for n, text in enumerate(raw.splitlines(), 1) if text.startswith(b"command:")), None)
    problem = missing_script(spec, source if line is None else f"{source}:{line}", submit_dir)
    if problem is not None:
        raise SpecError([problem])


TASKS_PER_CPU = 32  # processes a local run may start per CPU: a rehearsal, not a benchmark


def local_task_cap() -> int:
    """How many task processes a local run may start here: TASKS_PER_CPU per CPU, and at most half of what is
    left of this user's process limit (RLIMIT_NPROC), so that a typo cannot fork the machine to a halt."""
    import resource

    cap = TASKS_PER_CPU * (os.cpu_count() or 1)
    soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, max(soft // 2, 1))
    return cap


def _check_bad_node(spec: JobSpec, node: int, source: str) -> None:
    from slurmgen.spec.model import node_checks

    allocated = spec.nodes + spec.recovery.spare_nodes
    if not 1 <= node <= allocated:
        raise UsageError(f"--bad-node {node}: the job has nodes 1 to {allocated} (nodes + recovery.spare_nodes)")
    if not node_checks(spec):
        raise UsageError(f"--bad-node {node}: {source} checks no node before the step (set recovery.health_check or "
                         "recovery.spare_nodes), so there is no node check to fail")  # fmt: skip


# --- when Slurm's signals come ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    at: float  # seconds after the run's start
    kind: str  # "preempt", "rehearse": the user's rehearsals; "warn": --signal=B:<sig>@<lead>; "limit": the time limit
    step: int | None = None  # a step rehearsal's: fired when rank 0's program reached this step (at `at` s)


def timeline(spec: JobSpec, run: int, preempt_after: float | None, rehearse_after: float | None = None) -> list[Event]:
    """The events of run `run` (1 is the first), in time order.

    --preempt-after applies to the first run only: the rehearsal is one preemption, then the requeued run
    resumes and finishes. The --signal warning and the time limit apply to every run (Slurm re-arms the
    warning on requeue: src/slurmctld/job_mgr.c clears WARN_SENT when a job is requeued).
    """
    events: list[Event] = []
    if preempt_after is not None and run == 1:
        events.append(Event(preempt_after, "preempt"))
    if rehearse_after is not None and run == 1:
        events.append(Event(rehearse_after, "rehearse"))  # --kill-rank, --hang-rank: once, in the first run
    limit = spec.time_seconds
    if limit is not None:
        if spec.preemption.enabled:
            events.append(Event(float(limit - spec.preemption.lead_time), "warn"))
        events.append(Event(float(limit), "limit"))
    return sorted(events, key=lambda e: e.at)


# Slurm requeues a job as often as it is asked to; the job's own budgets (slurmgen.requeue) decide whether
# it asks. The runner stops a job that keeps asking anyway (a program calling `scontrol requeue` by itself), so a
# local run never loops forever.
RUNAWAY_REQUEUES = 20


# --- ids and places -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Paths:
    workdir: Path  # where the batch shell starts (spec.chdir under the submit directory)
    control: Path  # .slurmgen/local/<id>: the script, the fakes, requests
    batch_log: Path  # <output>/<name>-<id>.log, where Slurm writes the batch shell's output
    task_logs: Path  # <output>/<name>-<id>/: one <node>.log per node (the srun --output pattern)
    state_dir: Path

    @property
    def script(self) -> Path:
        return self.control / "job.sbatch"

    @property
    def bin(self) -> Path:
        return self.control / "bin"


def paths(spec: JobSpec, job_id: str, home: Path, submit_dir: Path) -> Paths:
    workdir = submit_dir / spec.chdir if spec.chdir else submit_dir
    return Paths(
        workdir=workdir,
        control=home / "local" / job_id,
        batch_log=workdir / batch_log(spec).replace("%j", job_id),
        task_logs=workdir / f"{task_log_stem(spec)}-{job_id}",
        state_dir=workdir / spec.preemption.state_dir,
    )


def rendezvous_port(spec: JobSpec, job_id: str) -> int:
    """The port the runtime will use for this job."""
    return contract.job_port(spec.distributed.port, spec.distributed.port_range, int(job_id))


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore binds; TIME_WAIT is fine
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def id_taken(
    spec: JobSpec, home: Path, submit_dir: Path, free: Callable[[int], bool] = port_free
) -> Callable[[str], bool]:
    """Whether a local id would collide: files of an earlier job with that id (a stale resume state would be
    loaded), or a rendezvous port in use (another local job, another user's test)."""

    def taken(job_id: str) -> bool:
        p = paths(spec, job_id, home, submit_dir)
        stale = [
            p.control,
            p.batch_log,
            p.task_logs,
            p.state_dir / f"{job_id}.state",
            p.state_dir / f"{job_id}.requeues",
        ]
        return any(path.exists() for path in stale) or not free(rendezvous_port(spec, job_id))

    return taken


# Local ids count per directory, but a state directory can be shared by several (an absolute preemption.state_dir,
# two worktrees of one project): their job 1s would share `1.state`. Each directory claims its ids in a ledger in
# the state directory, and an id another directory claimed there is skipped.
STATE_LEDGER = ".slurmgen-local-ids"


def state_claim(spec: JobSpec, home: Path, submit_dir: Path) -> Callable[[str], bool]:
    """Claim a local id in the job's state directory for this directory's jobs; False when another has it."""
    owner = str(home / "local")

    def claim(job_id: str) -> bool:
        if not spec.preemption.enabled:
            return True  # no state directory, no state to share
        state_dir = paths(spec, job_id, home, submit_dir).state_dir
        state_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        # A shared state directory: another user's ledger, or a link planted in its place, is refused (trust.py).
        why = trust.why_not_dir(str(state_dir))
        if why is not None:
            raise trust.Untrusted(f"{state_dir / STATE_LEDGER}: not believed: {why}")
        fd = trust.open_write(str(state_dir / STATE_LEDGER), mode=0o644, readable=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as handle:
                handle.seek(0)
                owners = dict(line.rstrip("\n").partition(" ")[::2] for line in handle if " " in line)
            if owners.get(job_id, owner) != owner:
                return False
            if job_id not in owners:
                os.write(fd, f"{job_id} {owner}\n".encode())
        finally:
            os.close(fd)
        return True

    return claim


def new_job_id(home: Path, taken: Callable[[str], bool], claim: Callable[[str], bool] = lambda job_id: True) -> str:
    """The next local job id: a counter in .slurmgen/local/last-id, under a lock, skipping ids in use here and ids
    that another directory claimed in a shared state directory (`claim`)."""
    directory = home / "local"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(directory / "last-id", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        number = int(text) if text.isdigit() else 0
        for _ in range(10000):
            number += 1
            if not taken(str(number)) and claim(str(number)):
                break
        else:
            raise UsageError(f"no free local job id after {number} in {directory}; remove old files there")
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{number}\n".encode())
    finally:
        os.close(fd)
    return str(number)
