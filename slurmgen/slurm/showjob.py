"""Parsing `scontrol show job` (one line per job with ``-o``, or blocks) into dicts and a typed summary.

Pure and standard-library only (the in-task runtime imports this). Values may contain spaces (JobName=,
Command=, WorkDir=, StdOut=...), so fields are split at known ``Key=`` boundaries, not at blanks. Pinned by
the recorded output in tests/data/slurm/show-job-*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from slurmgen.errors import SchedulerError
from slurmgen.slurm.ids import JobId, JobState, parse_state, state_name
from slurmgen.slurm.parse import leading_int, optional, parse_datetime, parse_duration

# --- scontrol show job -----------------------------------------------------------------------------------

# Keys whose values are free text and may contain spaces (and "x=y"): such a value ends only at a key from
# KNOWN_KEYS. Any other value ends at the next " Key=".
FREE_TEXT_KEYS = frozenset(
    """JobName Command WorkDir StdErr StdIn StdOut Comment AdminComment SystemComment
    Reason Extra MailUser Container ContainerID Features ClusterFeatures""".split()  # noqa: SIM905
)
# Every key Slurm 22.05 prints for a job, plus keys newer releases add; a free-text value ends at these.
KNOWN_KEYS = FREE_TEXT_KEYS | frozenset(
    """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet UserId GroupId
    MCS_label Priority Nice Account QOS WCKey JobState Dependency Requeue Restarts BatchFlag Reboot
    ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime EndTime
    Deadline PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition
    AllocNode:Sid ReqNodeList ExcNodeList NodeList SchedNodeList BatchHost NumNodes NumCPUs NumTasks
    CPUs/Task ReqB:S:C:T TRES Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode MinMemoryNode MinMemoryCPU
    MinTmpDiskNode DelayBoot OverSubscribe Contiguous Licenses LicensesAlloc Network Power TresPerNode
    TresPerJob TresPerSocket TresPerTask TresBind TresFreq CpusPerTres MemPerTres MailType NtasksPerTRES
    Reservation BurstBuffer BurstBufferState CpuFreqMin CpuFreqMax CpuFreqGov KillOInInvalidDependent
    SpreadJob OOMKillStep ResizeTime Cluster FedOrigin FedViableSiblings FedActiveSiblings SiblingsActive
    SiblingsViable Nodes CPU_IDs Mem GRES Segment CronJob CrontabSpec SelinuxContext""".split()  # noqa: SIM905
)
_KEY = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z0-9_:/]*)=")


def _fields(segment: str) -> Iterable[tuple[str, str]]:
    """Key=value pairs of one line (or one multi-line block line), values may contain spaces."""
    starts: list[re.Match[str]] = []
    for match in _KEY.finditer(segment):
        current = starts[-1][1] if starts else None
        if current is None or match[1] in KNOWN_KEYS or current not in FREE_TEXT_KEYS:
            starts.append(match)
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(segment)
        yield match[1], segment[match.end() : end].rstrip()


def parse_show_job(text: str) -> list[dict[str, str]]:
    """The records of ``scontrol show job``: with ``-o`` one line each, without it blocks of indented lines.

    A key that appears twice in one record keeps its first value (only a job name or path that contains
    " <known key>=" can make that happen).
    """
    records: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith("JobId="):
            records.append({})
        elif not line.strip() or line.strip() == "No jobs in the system":
            continue
        elif not (line[0].isspace() and records):
            raise SchedulerError(f"scontrol show job: unexpected line {line[:200]!r}")
        for key, value in _fields(line.strip()):
            records[-1].setdefault(key, value)
    return records


HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "job_requeued_in_held_state"})


@dataclass(frozen=True)
class JobInfo:
    """The fields of one ``scontrol show job`` record that slurmgen decides on; ``fields`` has them all."""

    job_id: JobId  # as users name it: 123, 123_4, 123_[3-5%2] or 123+1
    raw_id: int  # JobId=: each array task and het component has its own
    name: str
    state: JobState  # PENDING with a hold reason is HELD: it will not start without `scontrol release`
    state_name: str  # Slurm's own word, e.g. NODE_FAIL
    reason: str | None
    restarts: int
    requeue: bool  # Requeue=1: the job may be requeued (sbatch --requeue or the JobRequeue default)
    exit_code: int | None
    exit_signal: int | None
    nodes: str | None  # hostlist expression, e.g. node[1-2]
    num_nodes: int | None
    batch_host: str | None
    elapsed: int | None  # seconds (RunTime)
    time_limit: int | None  # seconds; None for UNLIMITED
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    preempt_time: datetime | None  # set while Slurm preempts the job (during its grace time, or completing)
    partition: str | None
    work_dir: str | None
    stdout: str | None
    stderr: str | None
    fields: Mapping[str, str] = field(compare=False, hash=False, repr=False)


def _job_id_of(rec: Mapping[str, str]) -> JobId:
    array_job, task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
    if array_job and task:
        if task.isdigit():
            return JobId(int(array_job), array_task=int(task))
        return JobId(int(array_job), array_tasks=task)
    het_job, offset = rec.get("HetJobId"), rec.get("HetJobOffset")
    if het_job and offset:
        return JobId(int(het_job), het_offset=int(offset))
    return JobId(int(rec["JobId"]))


def job_info(rec: Mapping[str, str]) -> JobInfo:
    """The typed summary of one record from parse_show_job."""
    if not rec.get("JobId", "").isdigit() or "JobState" not in rec:
        raise SchedulerError(f"scontrol show job: a record without JobId/JobState: {dict(rec)!r:.200}")
    state, reason = parse_state(rec["JobState"]), optional(rec.get("Reason"))
    if state is JobState.PENDING and reason in HELD_REASONS:
        state = JobState.HELD
    exit_code, _, signal = rec.get("ExitCode", "").partition(":")
    return JobInfo(
        job_id=_job_id_of(rec),
        raw_id=int(rec["JobId"]),
        name=rec.get("JobName", ""),
        state=state,
        state_name=state_name(rec["JobState"]),
        reason=reason,
        restarts=leading_int(rec.get("Restarts")) or 0,
        requeue=rec.get("Requeue") == "1",
        exit_code=int(exit_code) if exit_code.isdigit() else None,
        exit_signal=int(signal) if signal.isdigit() else None,
        nodes=optional(rec.get("NodeList")),
        num_nodes=leading_int(rec.get("NumNodes")),
        batch_host=optional(rec.get("BatchHost")),
        elapsed=parse_duration(rec.get("RunTime", "")),
        time_limit=parse_duration(rec.get("TimeLimit", "")),
        submit_time=parse_datetime(rec.get("SubmitTime", "")),
        start_time=parse_datetime(rec.get("StartTime", "")),
        end_time=parse_datetime(rec.get("EndTime", "")),
        preempt_time=parse_datetime(rec.get("PreemptTime", "")),
        partition=optional(rec.get("Partition")),
        work_dir=optional(rec.get("WorkDir")),
        stdout=optional(rec.get("StdOut")),
        stderr=optional(rec.get("StdErr")),
        fields=dict(rec),
    )
