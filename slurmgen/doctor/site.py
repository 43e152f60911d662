"""`slurmgen doctor`: what preemption and the time limit will do to a job on this cluster, from `scontrol show
config` and `scontrol show partition` (no accounting database needed): the mode, the grace time, whether the user
signal comes at preemption, KillWait, JobRequeue, the windows a stop has, the spec's lead time and the last save its
last job recorded, and one line per risk with its fix (slurmgen.slurm.site decides all of it).

Building and printing the report is pure; `examine` asks Slurm, `spec_last_save` reads the run history.
(Not to be confused with slurmgen.script.checks, which checks a rendered script.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slurmgen.errors import UsageError
from slurmgen.journal import Journal
from slurmgen.queries.history import LastSave, job_log_dirs, read_last_save, size_text
from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.expedite import expedite_problem
from slurmgen.slurm.ids import parse_job_id
from slurmgen.slurm.partition_time import time_left_out
from slurmgen.slurm.site import (
    NO_PREEMPTION,
    QOS,
    PartitionInfo,
    Risk,
    SiteConfig,
    SitePreemption,
    default_partition,
    parse_config,
    parse_partitions,
    risks,
    site_preemption,
    user_signal_spelling,
    window_basis,
)
from slurmgen.slurm.times import format_duration
from slurmgen.spec.model import JobSpec
from slurmgen.submission.targets import Target

WHAT_MODE_DOES = {
    "REQUEUE": "Slurm requeues a preempted job",
    "CANCEL": "Slurm cancels a preempted job",
    "SUSPEND": "Slurm suspends a preempted job in place",
}


@dataclass(frozen=True)
class SpecFacts:
    """What doctor needs of a spec."""

    source: str  # the path as given
    name: str
    partition: str | None
    lead_time: int | None  # the --signal lead; None with preemption off
    signal: str | None
    time_limit: int | None  # seconds; None when unlimited
    hang_timeout: int = 0  # recovery.hang_timeout; 0: no watchdog
    expedite: bool = False  # recovery.expedite: sbatch --requeue=expedite
    time_left_out: bool = False  # no `time:`: the partition's DefaultTime or MaxTime applies

    @classmethod
    def of(cls, source: str, spec: JobSpec) -> SpecFacts:
        on = spec.preemption.enabled
        return cls(
            source=source,
            name=spec.name,
            partition=spec.partition,
            lead_time=spec.preemption.lead_time if on else None,
            signal=spec.preemption.signal if on else None,
            time_limit=spec.time_seconds,
            hang_timeout=spec.recovery.hang_timeout,
            expedite=spec.recovery.expedite,
            time_left_out=spec.time is None,
        )


@dataclass(frozen=True)
class PartitionReport:
    info: PartitionInfo | None  # None: the spec names no partition and the cluster has no default
    plan: SitePreemption
    preemptors: tuple[str, ...]  # partitions whose jobs may preempt this one's (higher PriorityTier)
    risks: tuple[Risk, ...]


@dataclass(frozen=True)
class DoctorReport:
    site: SiteConfig
    spec: SpecFacts | None
    last: LastSave | None
    partitions: tuple[PartitionReport, ...]


def _chosen(partitions: list[PartitionInfo], spec: SpecFacts | None) -> list[PartitionInfo | None]:
    if spec is None:
        return list(partitions)
    if spec.partition is None:
        return [default_partition(partitions)]
    for part in partitions:
        if part.name == spec.partition:
            return [part]
    names = ", ".join(p.name for p in partitions) or "none"
    raise UsageError(
        f"{spec.source}: partition: {spec.partition!r} is not a partition of this cluster (it has {names})"
    )


def build_report(
    site: SiteConfig, partitions: list[PartitionInfo], spec: SpecFacts | None, last: LastSave | None
) -> DoctorReport:
    """The report for the spec's partition (or the default one), or without a spec for every partition."""
    lead = spec.lead_time if spec else None
    save, step = (last.seconds, last.step_seconds) if last else (None, None)
    reports = []
    for part in _chosen(partitions, spec):
        plan = site_preemption(site, part, lead)
        tier = part.priority_tier if part else None
        above = tuple(p.name for p in partitions if tier is not None and p.priority_tier > tier)
        found = risks(plan, lead, save, step, time_limit=spec.time_limit if spec else None)
        reports.append(PartitionReport(part, plan, above, tuple(found)))
    return DoctorReport(site, spec, last, tuple(reports))


def examine(client: SlurmClient, spec: SpecFacts | None, last: LastSave | None) -> DoctorReport:
    """Ask Slurm for its configuration and partitions; the report (SchedulerMissing without Slurm here)."""
    site = parse_config(client.show_config())
    return build_report(site, parse_partitions(client.show_partitions()), spec, last)


def spec_last_save(journal: Journal, spec: Path, cwd: Path | None = None) -> LastSave | None:
    """The last save recorded by the spec's last job (the slowest task's, for an array), if any."""
    entry = journal.last_for(str(spec), cwd)
    if entry is None or entry.job_id is None or not entry.log_dir:
        return None
    target = Target(parse_job_id(entry.job_id), entry)
    found = [read_last_save(d, d.name.removeprefix(f"{entry.name}-")) for d in job_log_dirs(target, [])]
    saves = [f for f in found if f is not None]
    return max(saves, key=lambda s: s.seconds + (s.step_seconds or 0.0)) if saves else None


# --- printing -----------------------------------------------------------------------------------------------------


def _row(label: str, text: str) -> str:
    return f"  {label:<13}{text}"


def _site_lines(report: DoctorReport) -> list[str]:
    site, spec, last = report.site, report.spec, report.last
    spelling = user_signal_spelling(site.version)
    if site.user_signal:
        signal = f"on: the --signal signal reaches the batch shell at preemption ({spelling})"
    else:
        signal = f"off: a preemption is told by SIGTERM only ({spelling} turns it on)"
    lines = [
        f"Slurm {site.version or '(version unknown)'}: what preemption and the time limit do to a job here",
        _row("PreemptType", site.preempt_type + (" (no preemption)" if site.preempt_type == NO_PREEMPTION else "")),
        _row("PreemptMode", f"{site.preempt_mode} (the cluster's; a partition may set its own)"),
        _row("user signal", signal),
        _row("KillWait", f"{site.kill_wait} s from SIGTERM to SIGKILL"),
        _row("JobRequeue", "1" if site.job_requeue else "0 (slurmgen asks for --requeue itself)"),
        _row("requeue", requeue_text(site)),
    ]
    if spec is not None and spec.expedite and (problem := expedite_problem(site)) is not None:
        lines.append(_row("risk", f"{spec.source}: recovery.expedite: {problem}; fix: remove recovery.expedite, "
                                  f"or ask the admins to enable it"))  # fmt: skip
    return lines + (spec_rows(spec, last) if spec is not None else [])


def requeue_text(site: SiteConfig) -> str:
    """How long a requeued run waits before it may start again, and whether an expedited requeue is allowed."""
    fast = "allowed (enable_expedited_requeue)" if site.expedited_requeue else "not allowed here"
    return (f"a requeued run may start {site.requeue_delay} s after the requeue ({site.requeue_delay_from}); "
            f"expedited requeue {fast}")  # fmt: skip


def spec_rows(spec: SpecFacts, last: LastSave | None) -> list[str]:
    """What the spec and its last job say: the lead time, the limit, the last save, and the hang timeout's risk."""
    lines: list[str] = []
    lead = f"lead time {spec.lead_time} s (--signal=B:{spec.signal}@{spec.lead_time})" if spec.lead_time else (
        "preemption off: no signal before the time limit"
    )  # fmt: skip
    limit = "left out (the partition's, below)" if spec.time_left_out else format_duration(spec.time_limit)
    lines.append(_row("spec", f"{spec.source}: job {spec.name}, {lead}, time limit {limit}"))
    if last is None:
        lines.append(_row("last save", "none recorded (no save in the run history of the spec's last job)"))
    else:
        step = f" + a step of {last.step_seconds:.1f} s" if last.step_seconds else ""
        size = f", {size_text(last.size)}" if last.size is not None else ""
        lines.append(_row("last save", f"{last.seconds:.1f} s{step}{size} (job {last.key}, run {last.run})"))
    if (hang := hang_risk(spec, last)) is not None:
        lines.append(_row("risk", hang))
    return lines


def hang_risk(spec: SpecFacts, last: LastSave | None) -> str | None:
    """recovery.hang_timeout shorter than the measured save or step: a slow save would be taken for a hang."""
    if not spec.hang_timeout or last is None:
        return None
    longest = max(last.seconds, last.step_seconds or 0.0)
    if longest < spec.hang_timeout:
        return None
    what = "save" if last.seconds >= (last.step_seconds or 0.0) else "step"
    return (f"recovery.hang_timeout {spec.hang_timeout} s is not longer than the measured {what} of {longest:.1f} s "
            f"(job {last.key}, run {last.run}): a healthy {what} would be taken for a hang; fix: raise "
            f"recovery.hang_timeout above {int(longest * 2) + 60} s")  # fmt: skip


def _partition_lines(report: DoctorReport, part: PartitionReport, shared: set[Risk]) -> list[str]:
    plan, site = part.plan, report.site
    name = plan.partition or "(no partition: the spec names none and the cluster has no default)"
    title = f"partition {name}" + (" (default)" if part.info is not None and part.info.default else "")
    if plan.mode == "OFF":
        why = "PreemptType=preempt/none" if site.preempt_type == NO_PREEMPTION else "PreemptMode=OFF"
        mode = f"OFF: its jobs are not preempted ({why})"
    else:
        mode = f"{plan.mode}: {WHAT_MODE_DOES[plan.mode]}"
    if site.preempt_type == QOS:
        grace, by = "from the job's QOS (unknown here; assumed 0)", "jobs of a higher-priority QOS"
    else:
        grace = f"{plan.grace} s" + (" (Slurm acts on its end within about 30 s more)" if plan.grace else "")
        by = ", ".join(part.preemptors) or "none: no partition has a higher PriorityTier"
    lines = [title, _row("mode", mode)]
    if report.spec is not None and report.spec.time_left_out:
        lines.append(_row("time", time_left_out(part.info).removeprefix("time left out: ")))
    if plan.mode in ("REQUEUE", "CANCEL"):
        lines.append(_row("GraceTime", grace))
    if plan.mode != "OFF":
        lines.append(_row("preempted by", by))
    windows = ", ".join(f"{c} {w:g} s ({window_basis(plan, c)})" for c, w in sorted(plan.windows.items()))
    lines.append(_row("windows", windows or "none: nothing signals its jobs before they end"))
    own = [r for r in part.risks if r not in shared]
    lines += [_row("risk", f"{r.what}; fix: {r.fix}") for r in own]
    if not own:
        lines.append(_row("risks", "only the cluster's (above)" if shared else "none found"))
    return lines


def render(report: DoctorReport) -> str:
    """The report as text: the cluster, then one block per partition; a risk every partition shares (such as
    JobRequeue=0) is printed once, with the cluster."""
    parts = report.partitions
    shared = set.intersection(*(set(p.risks) for p in parts)) if len(parts) > 1 else set()
    site = _site_lines(report)
    site += [_row("risk", f"{r.what}; fix: {r.fix}") for r in parts[0].risks if r in shared] if shared else []
    blocks = [site] + [_partition_lines(report, p, shared) for p in parts]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
