"""The `#SBATCH` directives of a job, computed from the spec. Pure; the template only prints them.

Slurm's directive parser (src/sbatch/opt.c, _opt_batch_script/get_argument) splits on whitespace, groups quotes,
treats a backslash as an escape and an unquoted `#` as a comment, and stops at the first command. So every value
is single-quoted here, and the spec never lets a newline, control character or backslash into one.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmgen.spec.model import JobSpec


@dataclass(frozen=True)
class Directive:
    option: str  # long option name without dashes
    value: str | None  # None: a flag

    def line(self) -> str:
        if self.value is None:
            return f"#SBATCH --{self.option}"
        return f"#SBATCH --{self.option}={sq(self.value)}"


def sq(value: str) -> str:
    """Single-quote for bash and for sbatch's directive parser alike: always quoted, `'` as `'"'"'`."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def job_key_pattern(spec: JobSpec) -> str:
    """The job's key in Slurm's filename patterns: `%A_%a` for an array task, else `%j`."""
    return "%A_%a" if spec.array or spec.sweep else "%j"


def batch_log(spec: JobSpec) -> str:
    """The batch shell's log, directly in the output directory (which must exist before sbatch runs)."""
    return f"{spec.output.rstrip('/') or '/'}/{spec.name}-{job_key_pattern(spec)}.log".replace("//", "/")


def batch_error_log(spec: JobSpec) -> str:
    """The batch shell's stderr apart from its stdout (spec field error): `.err`, so that it never takes the name
    of the output log when both are in one directory."""
    assert spec.error is not None
    return f"{spec.error.rstrip('/') or '/'}/{spec.name}-{job_key_pattern(spec)}.err".replace("//", "/")


def task_log_stem(spec: JobSpec) -> str:
    """The per-node log directory without the job's key: the script appends `-<jobid>` (or array key)."""
    return f"{spec.output.rstrip('/')}/{spec.name}"


def directives(spec: JobSpec) -> list[Directive]:
    d: list[Directive] = []

    def add(option: str, value: object | None) -> None:
        if value is not None:
            d.append(Directive(option, str(value)))

    add("job-name", spec.name)
    # Spare nodes (recovery.spare_nodes) are part of the allocation; the step runs on `nodes` healthy ones.
    add("nodes", spec.nodes + spec.recovery.spare_nodes)
    add("ntasks-per-node", spec.tasks_per_node)
    if spec.gpus_per_node:
        add("gpus-per-node", spec.gpus_per_node)
    add("cpus-per-task", spec.cpus_per_task)
    add("mem", spec.mem)
    add("time", spec.time)
    add("partition", spec.partition)
    add("account", spec.account)
    add("qos", spec.qos)
    add("constraint", spec.constraint)
    add("array", spec.array)
    add("dependency", spec.dependency)
    add("chdir", spec.chdir)
    add("output", batch_log(spec))
    if spec.error:
        add("error", batch_error_log(spec))
    if spec.recovery.spare_nodes:
        # Keep the job when one of its nodes fails (sbatch(1) --no-kill): a spare takes its place.
        d.append(Directive("no-kill", None))
    # A requeued run must not truncate the earlier run's log (JobFileAppend=0 is Slurm's default).
    add("open-mode", "append")
    pre = spec.preemption
    # sbatch(1) of 25.11: --requeue[=expedite]; the site must allow it (slurm.conf(5) SlurmctldParameters=
    # enable_expedited_requeue) or slurmctld refuses the job (src/slurmctld/job_mgr.c, "Expedited requeue
    # requested but not enabled"). doctor and submit check the site first (slurmgen/slurm/expedite.py).
    requeue = "expedite" if spec.recovery.expedite else None
    if pre.enabled:
        # Explicit, because a site may set JobRequeue=0 and the runtime relies on requeue.
        d.append(Directive("requeue", requeue))
        # B: sends the signal to the batch shell only; its trap forwards it to the step (srun passes it on to
        # every task). The shell sees it even before the step exists, so it is never lost (Slurm would drop a
        # step-only signal sent before srun starts).
        add("signal", f"B:{pre.signal}@{pre.lead_time}")
    elif requeue:
        d.append(Directive("requeue", requeue))
    if spec.env:
        from slurmgen.spec.secrets import export_option

        # env entries with from_env: Slurm carries their values; the script names them only (spec/secrets.py).
        add("export", export_option(spec.env))
    for option, value in spec.sbatch:
        d.append(Directive(option, value))
    return d
