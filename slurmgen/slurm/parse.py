"""Parsing what sbatch and squeue print (their values' words: slurm/ids.py). Pure; client.py runs the commands.

Standard library only (the in-task runtime imports this). Every format here is pinned by recorded output
of Slurm 22.05, 24.11 and 26.05 in tests/data/slurm/<version>/ plus hand-written files for forms a local
cluster cannot produce.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from slurmgen.errors import SchedulerError, UsageError
from slurmgen.slurm.ids import (
    JobId,
    JobState,
    leading_int,
    optional,
    parse_datetime,
    parse_duration,
    parse_job_id,
    parse_state,
    state_name,
)

# --- sbatch -----------------------------------------------------------------------------------------------


class Submitted(NamedTuple):
    job_id: JobId
    cluster: str | None  # set only in multi-cluster or federated setups


# `--parsable` prints "123" or "123;cluster" (sbatch.c); without it "Submitted batch job 123", plus
# " on cluster x" with --clusters (simple_slurm #4). Site wrappers may add lines around it (dask-jobqueue #209).
_SUBMITTED = (
    re.compile(r"Submitted batch job (?P<id>\d+)(?: on cluster (?P<cluster>\S+))?"),
    re.compile(r"(?P<id>\d+)(?:;(?P<cluster>\S+))?"),
)


def parse_sbatch_output(stdout: str) -> Submitted:
    """The job id (and cluster) from sbatch's stdout, in every form it takes.

    Lines that are not an id line (banners, site messages) are skipped. Two id lines naming different jobs
    are an error rather than a guess: requeueing or cancelling the wrong job is worse than stopping.
    """
    found: list[Submitted] = []
    for line in stdout.splitlines():
        for pattern in _SUBMITTED:
            match = pattern.fullmatch(line.strip())
            if match:
                found.append(Submitted(JobId(int(match["id"])), match["cluster"]))
                break
    if not found:
        shown = stdout.strip()[:200] or "nothing"
        raise SchedulerError(f"sbatch printed no job id (it printed {shown!r})")
    if len(set(found)) > 1:
        ids = ", ".join(str(s.job_id) for s in dict.fromkeys(found))
        raise SchedulerError(f"sbatch output names several jobs ({ids}); not guessing which one is ours")
    return found[0]


@dataclass(frozen=True)
class TestOnly:
    """What `sbatch --test-only` says (on stderr) about when and where the job would start."""

    __test__ = False  # not a pytest test class, despite the name

    start: datetime | None
    processors: int
    nodes: str
    partition: str
    message: str


# 26.05 prints "... to start at <time> a using ..." (a stray " a" in sbatch's format string; 24.11 does not,
# and 25.05 was reported to print it too): tests/data/slurm/26.05/sbatch-test-only.err.
_TEST_ONLY = re.compile(
    r"sbatch: Job (?P<id>\d+) to start at (?P<start>\S+)(?: a)? using (?P<procs>\d+) processors"
    r" on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)"
)


def parse_test_only(stderr: str) -> TestOnly:
    for line in stderr.splitlines():
        match = _TEST_ONLY.fullmatch(line.strip())
        if match:
            return TestOnly(
                parse_datetime(match["start"]),
                int(match["procs"]),
                match["nodes"],
                match["partition"],
                line.strip(),
            )
    raise SchedulerError(f"sbatch --test-only: unexpected output {stderr.strip()[:200]!r}")


# --- squeue ----------------------------------------------------------------------------------------------

# One field per format code, separated by ASCII unit separator, which no id, state, time or node list
# contains. The job name (free text) comes last, so even a separator inside a name cannot shift a field.
SQUEUE_SEPARATOR = "\x1f"
SQUEUE_FIELDS = ("%i", "%A", "%T", "%r", "%M", "%l", "%D", "%N", "%P", "%j")
SQUEUE_FORMAT = SQUEUE_SEPARATOR.join(SQUEUE_FIELDS)


@dataclass(frozen=True)
class QueueEntry:
    job_id: JobId  # %i: 123, 123_4 or 123_[3-5%2]
    raw_id: int  # %A: the job record's own id (each array task has one)
    state: JobState
    state_name: str
    reason: str | None
    elapsed: int | None  # seconds
    time_limit: int | None  # seconds; None for UNLIMITED
    num_nodes: int | None
    nodes: str | None
    partition: str
    name: str


def parse_squeue(text: str) -> list[QueueEntry]:
    """Rows of ``squeue --noheader --format=SQUEUE_FORMAT``."""
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SQUEUE_SEPARATOR, len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS):
            raise SchedulerError(f"squeue: unexpected line {line!r} (was --format={SQUEUE_FORMAT!r} used?)")
        jid, raw, state, reason, elapsed, limit, num_nodes, nodes, partition, name = parts
        entries.append(
            QueueEntry(
                job_id=parse_job_id(jid),
                raw_id=int(raw),
                state=parse_state(state),
                state_name=state_name(state),
                reason=optional(reason),
                elapsed=parse_duration(elapsed),
                time_limit=parse_duration(limit),
                num_nodes=leading_int(num_nodes),
                nodes=optional(nodes),
                partition=partition,
                name=name,
            )
        )
    return entries


# `squeue --format=COMMENT_FORMAT`: the job id and its comment (free text, so it comes last).
COMMENT_FORMAT = SQUEUE_SEPARATOR.join(("%i", "%k"))


def parse_comments(text: str) -> list[tuple[JobId, str]]:
    """Rows of ``squeue --noheader --format=COMMENT_FORMAT``; a job without a comment has ``""``."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        jid, sep, comment = line.partition(SQUEUE_SEPARATOR)
        if not sep:
            raise SchedulerError(f"squeue: unexpected line {line!r} (was --format={COMMENT_FORMAT!r} used?)")
        rows.append((parse_job_id(jid), optional(comment) or ""))
    return rows


# --- scontrol --oneliner show step ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRecord:
    step: JobId  # e.g. 20_1.0 (array task 1's step 0), 77.batch
    state: str
    srun_host: str | None  # where the srun that started the step runs (SrunHost:Pid=node1:22250)
    srun_pid: int | None


def parse_steps(text: str) -> list[StepRecord]:
    """One record per line of `scontrol --oneliner show step <job>` (Slurm 22.05: `StepId=20_1.0 ... State=RUNNING
    ... SrunHost:Pid=node1:22250`; the batch and extern steps show `SrunHost:Pid=(null):0`)."""
    records: list[StepRecord] = []
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "StepId" not in fields:
            continue
        try:
            step = parse_job_id(fields["StepId"])
        except UsageError:
            continue
        host, _, pid = fields.get("SrunHost:Pid", "").rpartition(":")
        records.append(
            StepRecord(
                step,
                fields.get("State", ""),
                host if host and host != "(null)" else None,
                int(pid) if pid.isdigit() and pid != "0" else None,
            )
        )
    return records
