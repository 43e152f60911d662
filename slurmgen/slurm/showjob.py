"""What `scontrol show job` answers, parsed: one line per job with ``-o``, or blocks, into dicts and a typed
summary (`JobInfo`).

Values may contain spaces (JobName=, Command=, SubmitLine=, WorkDir=, StdOut=...), so fields are split at ``Key=``
boundaries, not at blanks, and free-text values only where scontrol's own order says they end. Pinned by the
recordings of every Slurm version in tests/data/slurm/<version>/show-job-*.

Pure and standard-library only (the in-task runtime imports this, through the client).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from slurmgen.errors import SchedulerError
from slurmgen.slurm.ids import (
    JobId,
    JobState,
    leading_int,
    optional,
    parse_datetime,
    parse_duration,
    parse_sluid,
    parse_state,
    state_name,
)

# Which text after "Key=" belongs to which key. scontrol prints `Key=value` pairs separated by blanks, and a
# value may contain blanks (paths, job names), so a value runs up to the next " Key=" -- except for the few
# keys whose values are free text that may itself contain " Key=" (a job name, the command, the whole sbatch
# command line of 26.05's SubmitLine=, comments). Their values end only where the key that scontrol prints
# after them starts (src/scontrol/info_job.c, _sprint_job_info; src/api/job_info.c in 22.05). So a key that a
# newer Slurm adds, printed after an ordinary key, becomes a field of its own and never shifts a known one;
# and "WorkDir=" inside a submit line cannot end the submit line early.
#
# Free-text key -> the keys that may come right after it, in any version from 22.05 to 26.05.
FREE_TEXT_NEXT: Mapping[str, frozenset[str]] = {
    "JobName": frozenset({"SLUID", "HetJobIdSet", "UserId"}),  # SLUID= from 26.05 with --details
    "Command": frozenset({"SubmitLine", "WorkDir"}),  # SubmitLine= from 26.05
    "SubmitLine": frozenset({"WorkDir"}),
}
# Keys printed after WorkDir= (each only when set): a submit line's value ends before the first of them.
_AFTER_WORKDIR = frozenset({"AdminComment", "SystemComment", "Comment", "Extra", "StdErr", "StdIn", "StdOut"})
# Free text whose next key varies (optional lines follow): it ends at the next known key not yet in the record.
FREE_TEXT_KEYS = frozenset(FREE_TEXT_NEXT) | frozenset({"Comment", "AdminComment", "SystemComment", "Extra"})
# Every key Slurm 22.05 to 26.05 prints for a job.
KNOWN_KEYS = FREE_TEXT_KEYS | frozenset(
    """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet UserId GroupId
    MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue Restarts BatchFlag Reboot
    ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime EligibleTime AccrueTime StartTime EndTime
    Deadline PreemptEligibleTime PreemptTime SuspendTime SecsPreSuspend LastSchedEval Scheduler Partition
    AllocNode:Sid ReqNodeList ExcNodeList NodeList SchedNodeList BatchHost NumNodes NumCPUs NumTasks
    CPUs/Task ReqB:S:C:T TRES ReqTRES AllocTRES Socks/Node NtasksPerN:B:S:C CoreSpec MinCPUsNode
    MinMemoryNode MinMemoryCPU MinTmpDiskNode Features ClusterFeatures BatchFeatures DelayBoot OverSubscribe
    Exclusive Contiguous Licenses LicensesAlloc Network WorkDir StdErr StdIn StdOut Power TresPerNode
    TresPerJob TresPerSocket TresPerTask TresBind TresFreq CpusPerTres MemPerTres MailUser MailType
    NtasksPerTRES Reservation BurstBuffer BurstBufferState CpuFreqMin CpuFreqMax CpuFreqGov
    KillOInInvalidDependent SpreadJob OOMKillStep ResizeTime Cluster FedOrigin FedViableSiblings
    FedActiveSiblings SiblingsActive SiblingsViable Nodes CPU_IDs Mem GRES Segment CronJob CrontabSpec
    SelinuxContext ContainerType Container ContainerID Switches SLUID""".split()  # noqa: SIM905
)
_KEY = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z0-9_:/]*)=")


def _free_text_end(key: str, later: list[re.Match[str]], seen: set[str]) -> int | None:
    """Index into ``later`` (the candidate keys after a free-text ``key``) of the one that really follows it."""
    nexts = FREE_TEXT_NEXT.get(key)
    if key == "SubmitLine":
        # The submit line is the user's argv: it may hold " WorkDir=..." itself. The real WorkDir= is the last
        # one before anything that scontrol prints after WorkDir=.
        last = None
        for i, match in enumerate(later):
            if match[1] in _AFTER_WORKDIR:
                break
            if match[1] == "WorkDir":
                last = i
        if last is not None:
            return last
    elif nexts is not None:
        found = next((i for i, match in enumerate(later) if match[1] in nexts), None)
        if found is not None:
            return found
    # The next key scontrol prints that this record does not have yet.
    return next((i for i, m in enumerate(later) if m[1] in KNOWN_KEYS and m[1] not in seen), None)


def _fields(segment: str, one_line: bool) -> Iterable[tuple[str, str]]:
    """Key=value pairs of one ``-o`` record, or of one line of a multi-line record (values may hold blanks).

    On a line of the multi-line form a free-text value runs to the end of the line: scontrol gives each of
    them a line of its own, or puts it last on its line (JobName=).
    """
    candidates = list(_KEY.finditer(segment))
    seen: set[str] = set()
    i = 0
    while i < len(candidates):
        match = candidates[i]
        key = match[1]
        if key in FREE_TEXT_KEYS:
            end = _free_text_end(key, candidates[i + 1 :], seen) if one_line else None
            nxt = len(candidates) if end is None else i + 1 + end
        else:
            nxt = i + 1
        stop = candidates[nxt].start() if nxt < len(candidates) else len(segment)
        seen.add(key)
        yield key, segment[match.end() : stop].rstrip()
        i = nxt


def parse_show_job(text: str) -> list[dict[str, str]]:
    """The records of ``scontrol show job``: with ``-o`` one line each, without it blocks of indented lines.

    A key that appears twice in one record keeps its first value (only a value that contains " <key>=" where
    the key cannot be told from the text around it can make that happen).
    """
    records: list[dict[str, str]] = []
    lines = text.splitlines()
    # The multi-line form indents every line of a record but the first; -o output has no indented line.
    one_line = not any(line[:1].isspace() for line in lines)
    for line in lines:
        if line.startswith("JobId="):
            records.append({})
        elif not line.strip() or line.strip() == "No jobs in the system":
            continue
        elif not (line[0].isspace() and records):
            raise SchedulerError(f"scontrol show job: unexpected line {line[:200]!r}")
        for key, value in _fields(line.strip(), one_line):
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

    @property
    def sluid(self) -> str | None:
        """This run's SLUID: `scontrol show job --details` prints SLUID= from 26.05 (src/scontrol/info_job.c)."""
        return parse_sluid(self.fields.get("SLUID"))


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
