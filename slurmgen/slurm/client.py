"""Slurm's client commands: sbatch, scontrol, squeue and scancel, as argv lists with a timeout, never a shell;
and what `scontrol show job` answers, parsed (below the client).

The effect is one injected callable (``run``); the other commands' output is parsed in slurmgen.slurm.parse, and
the words for an id, a state and a value in slurmgen.slurm.ids. `scontrol show job` is parsed here, where it is
asked: one line per job with ``-o``, or blocks, into dicts and a typed summary. Values may contain spaces (JobName=,
Command=, SubmitLine=, WorkDir=, StdOut=...), so fields are split at ``Key=`` boundaries, not at blanks, and
free-text values only where scontrol's own order says they end. Pinned by the recordings of every Slurm version in
tests/data/slurm/<version>/show-job-*.

Standard library and slurmgen.errors only: the in-task runtime imports this module (for `scontrol requeue`), so
it must not pull in typer, jinja2 or yaml.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from slurmgen.errors import SchedulerError, SchedulerMissing, UsageError
from slurmgen.signal_names import require_signal_name
from slurmgen.slurm.ids import (
    JobId,
    JobState,
    as_job_id,
    leading_int,
    optional,
    parse_datetime,
    parse_duration,
    parse_state,
    state_name,
)
from slurmgen.slurm.parse import (
    COMMENT_FORMAT,
    SQUEUE_FORMAT,
    QueueEntry,
    StepRecord,
    Submitted,
    TestOnly,
    parse_comments,
    parse_sbatch_output,
    parse_squeue,
    parse_steps,
    parse_test_only,
)

if TYPE_CHECKING:
    from slurmgen.slurm.array_queue import TaskRow

DEFAULT_TIMEOUT = 30.0  # seconds; a hung scontrol must not hang a task (submitit #1713)

# run(argv, env, timeout) -> CompletedProcess with text stdout/stderr. Raises what subprocess.run raises.
Runner = Callable[[Sequence[str], Mapping[str, str] | None, float], "subprocess.CompletedProcess[str]"]


def run_command(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
    """The default Runner: subprocess.run on an argv list, output captured as text, no shell."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        timeout=timeout,
        check=False,
    )


# --- errors Slurm reports, mapped to what the caller can act on ------------------------------------------


class InvalidJobId(SchedulerError):
    """Slurm does not know the job ("Invalid job id specified"): wrong id, or purged after MinJobAge."""


class RequeueDisabled(SchedulerError):
    """ "Requested operation is presently disabled": the job has --no-requeue (or the site JobRequeue=0)."""


class SchedulerTimeout(SchedulerError):
    """A Slurm command gave no answer in time. For sbatch the job may exist or not: never retry blindly (sbatch(1)
    retries internally, and a timed-out reply may hide a job that exists: autosubmit #442); look for the submission's
    comment instead (SlurmClient.comments)."""


class JobPending(SchedulerError):
    """ "Job is pending execution": the job is queued already (e.g. a second requeue right after one)."""


_KNOWN_ERRORS: tuple[tuple[str, type[SchedulerError], str], ...] = (
    (
        "Invalid job id specified",
        InvalidJobId,
        "Slurm does not know job {job} (wrong id, or finished long ago)",
    ),
    (
        "Requested operation is presently disabled",
        RequeueDisabled,
        "job {job} cannot be requeued: it was submitted with --no-requeue (or the cluster sets JobRequeue=0)",
    ),
    ("Job is pending execution", JobPending, "job {job} is pending already; there is nothing to requeue"),
    (
        "Only batch jobs are accepted",
        SchedulerError,
        "job {job} is not a batch job; only sbatch jobs requeue",
    ),
)


# What a client prints when it has no controller to talk to (no slurm.conf and no DNS SRV record for configless
# Slurm, or a controller that does not answer): "no Slurm here" (exit 4), not "Slurm refused" (exit 3).
_UNREACHABLE = (
    "Could not establish a configuration source",
    "Unable to process configuration file",
    "Unable to contact slurm controller",
)


def _failure(what: str, job: str, result: subprocess.CompletedProcess[str]) -> SchedulerError | SchedulerMissing:
    text = f"{result.stderr}\n{result.stdout}"
    for needle in _UNREACHABLE:
        if needle in text:
            return SchedulerMissing(f"{what}: no Slurm controller reachable from here ({needle.lower()}); run it "
                                    "where sbatch works, or set SLURM_CONF")  # fmt: skip
    for needle, kind, message in _KNOWN_ERRORS:
        if needle in text:
            return kind(f"{what}: " + message.format(job=job))
    lines = [re.sub(r"^\S+: error: ", "", ln.strip()) for ln in result.stderr.splitlines() if ln.strip()]
    detail = "; ".join(lines) or result.stdout.strip() or "no message"
    return SchedulerError(f"{what} failed (exit {result.returncode}): {detail}")


# --- the submission environment ---------------------------------------------------------------------------

_INHERITED = re.compile(r"(SBATCH|SLURM|PMIX|SALLOC|SRUN)_")


def clean_submit_env(mapping: Mapping[str, str], keep: Iterable[str] = ()) -> dict[str, str]:
    """The environment to run sbatch in: the given one without inherited Slurm job variables.

    Input variables beat #SBATCH lines (sbatch(1) "INPUT ENVIRONMENT VARIABLES"), and SLURM_* left from an
    enclosing allocation leak into the new job (a SLURM_CPU_BIND pinned every rank to a few cores in
    goodfire-ai/spd #955; a stale SLURM_ARRAY_JOB_ID in submitit #1782).
    SLURM_CONF stays: it says which cluster to talk to (submitit #1814). ``keep`` names more to keep.
    """
    kept = {"SLURM_CONF", *keep}
    return {k: v for k, v in mapping.items() if k in kept or not _INHERITED.match(k)}


# --- the client -------------------------------------------------------------------------------------------


class SlurmClient:
    """Slurm's client commands. ``run`` is the only effect; ``env=None`` means this process's environment."""

    def __init__(
        self,
        run: Runner = run_command,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._run = run
        self._env = env
        self.timeout = timeout

    def _call(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return self._run(argv, self._env if env is None else env, self.timeout)
        except FileNotFoundError:
            raise SchedulerMissing(
                f"{argv[0]}: command not found (is the Slurm client installed and on PATH?)"
            ) from None
        except PermissionError as exc:
            raise SchedulerMissing(f"{argv[0]}: cannot be run: {exc.strerror}") from exc
        except subprocess.TimeoutExpired:
            hint = " The job may or may not have been submitted: check squeue." if argv[0] == "sbatch" else ""
            raise SchedulerTimeout(f"{' '.join(argv)}: no answer from Slurm within {self.timeout:g} s.{hint}") from None

    def _checked(
        self, argv: Sequence[str], what: str, job: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """_call, and a non-zero exit raised as the SchedulerError that Slurm's message maps to."""
        result = self._call(argv, env)
        if result.returncode != 0:
            raise _failure(what, job, result)
        return result

    # -- submit --

    @overload
    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = ...,
        *,
        parsable: bool = ...,
        test_only: Literal[False] = ...,
    ) -> Submitted: ...

    @overload
    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = ...,
        *,
        parsable: bool = ...,
        test_only: Literal[True],
    ) -> TestOnly: ...

    def sbatch(
        self,
        script: Path | str,
        extra_args: Sequence[str] = (),
        *,
        parsable: bool = True,
        test_only: bool = False,
    ) -> Submitted | TestOnly:
        """Submit ``script`` (or with test_only, ask when it would start without submitting).

        Runs in clean_submit_env(env) so that inherited SBATCH_*/SLURM_* cannot override the script.
        """
        argv = self.sbatch_argv(script, extra_args, parsable=parsable, test_only=test_only)
        env = clean_submit_env(os.environ if self._env is None else self._env)
        result = self._checked(argv, "sbatch", os.fspath(script), env)
        # --test-only reports on stderr and submits nothing.
        return parse_test_only(result.stderr) if test_only else parse_sbatch_output(result.stdout)

    @staticmethod
    def sbatch_argv(
        script: Path | str, extra_args: Sequence[str] = (), *, parsable: bool = True, test_only: bool = False
    ) -> list[str]:
        """The exact argv sbatch() runs (a dry run prints it)."""
        argv = ["sbatch", *(["--parsable"] if parsable else []), *(["--test-only"] if test_only else [])]
        return [*argv, *extra_args, os.fspath(script)]

    # -- look --

    def comments(self, name: str | None = None) -> list[tuple[JobId, str]]:
        """(job id, comment) of this user's jobs in every state Slurm still shows, optionally of one job name.

        How a submission whose sbatch timed out is found: it carries a unique token in its comment.
        """
        argv = ["squeue", "--me", "--noheader", "--states=all", f"--format={COMMENT_FORMAT}"]
        if name is not None:
            argv.append(f"--name={name}")
        return parse_comments(self._checked(argv, "squeue", "").stdout)

    def show_jobs(self, job: JobId | str | int | None = None) -> list[JobInfo]:
        """Every record `scontrol show job` has for ``job`` (an array job gives one per task), or all jobs."""
        return self._show_jobs(None if job is None else str(as_job_id(job).without_step()), str(job))

    def _show_jobs(self, target: str | None, asked: str) -> list[JobInfo]:
        """`scontrol show job` of ``target`` (a job id checked already, or None: every job); ``asked`` names it in
        an error."""
        argv = ["scontrol", "--oneliner", "show", "job"]
        if target is not None:
            argv.append(target)
        result = self._call(argv)
        if result.returncode != 0:
            error = _failure("scontrol show job", asked, result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return [job_info(rec) for rec in parse_show_job(result.stdout)]

    def show_job(self, job: JobId | str | int) -> JobInfo | None:
        """The record of one job, or None when Slurm does not know it ("Invalid job id specified")."""
        wanted = as_job_id(job).without_step()
        target = str(wanted)
        records = self._show_jobs(target, target)  # the id checked once, here
        for info in records:
            if info.job_id == wanted or (wanted.array_task is None and info.raw_id == wanted.job):
                return info
        return records[0] if len(records) == 1 else None

    def squeue(self, jobs: Iterable[JobId | str | int] = (), *, all_states: bool = False) -> list[QueueEntry]:
        """squeue rows for ``jobs`` (all jobs when empty); finished jobs too with ``all_states``."""
        argv = ["squeue", "--noheader", f"--format={SQUEUE_FORMAT}"]
        ids = [str(as_job_id(j).without_step()) for j in jobs]
        if ids:
            argv.append("--jobs=" + ",".join(ids))
        if all_states:
            argv.append("--states=all")
        result = self._call(argv)
        if result.returncode != 0:
            error = _failure("squeue", ",".join(ids), result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return parse_squeue(result.stdout)

    def array_tasks(self, jobs: Iterable[JobId | str | int]) -> list[TaskRow]:
        """Every task of these job arrays, finished ones included, in one squeue call (slurm.array_queue)."""
        from slurmgen.slurm import array_queue

        ids = sorted({str(as_job_id(j).without_step()) for j in jobs})
        result = self._call(array_queue.argv(ids))
        if result.returncode != 0:
            error = _failure("squeue", ",".join(ids), result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return array_queue.parse(result.stdout)

    def steps(self, job: JobId | str | int) -> list[StepRecord]:
        """The steps of one job (`scontrol --oneliner show step <job>`); [] when Slurm does not know the job."""
        target = str(as_job_id(job).without_step())
        result = self._call(["scontrol", "--oneliner", "show", "step", target])
        if result.returncode != 0:
            error = _failure("scontrol show step", target, result)
            if isinstance(error, InvalidJobId):
                return []
            raise error
        return parse_steps(result.stdout)

    def show_hostnames(self, expression: str) -> list[str]:
        """Expand a hostlist expression with `scontrol show hostnames`.

        Always with an explicit argument: without one scontrol reads SLURM_NODELIST (src/scontrol/scontrol.c). An
        invalid hostlist is reported on stderr with exit status 0, so any stderr output is an error here.
        """
        expression = expression.strip()
        if not expression or expression.startswith("-") or any(c.isspace() for c in expression):
            raise UsageError(f"not a hostlist expression: {expression!r}")
        result = self._call(["scontrol", "show", "hostnames", expression])
        if result.returncode != 0 or result.stderr.strip():
            detail = result.stderr.strip() or f"exit {result.returncode}"
            raise SchedulerError(f"scontrol show hostnames {expression}: {detail}")
        return result.stdout.split()

    def show_config(self) -> str:
        """`scontrol show config`: the controller's configuration, as text (slurmgen.slurm.site parses it)."""
        return self._checked(["scontrol", "show", "config"], "scontrol show config", "").stdout

    def show_partitions(self, name: str | None = None) -> str:
        """`scontrol -o show partition [name]`: one line per partition (slurmgen.slurm.site parses it).

        An unknown name is a SchedulerError ("Partition x not found", exit 1)."""
        argv = ["scontrol", "-o", "show", "partition"]
        if name is not None:
            if not name or name.startswith("-") or any(c.isspace() or c == "," for c in name):
                raise UsageError(f"not a partition name: {name!r}")
            argv.append(name)
        return self._checked(argv, "scontrol show partition", "").stdout

    # -- act --

    def requeue(self, job: JobId | str | int, *, hold: bool = False, incomplete: bool = False) -> None:
        """`scontrol requeue` (or `requeuehold`) one job; an array task alone, never its whole array.

        ``incomplete`` acts only on a job that is running or suspended and is a no-op otherwise, so a second call while
        the job is pending is harmless (scontrol(1), requeue: Incomplete). Errors: RequeueDisabled (--no-requeue),
        JobPending (already pending), InvalidJobId.
        """
        target = as_job_id(job).requeue_target()
        command = "requeuehold" if hold else "requeue"
        argv = ["scontrol", command, *(["Incomplete"] if incomplete else []), target]
        self._checked(argv, f"scontrol {command}", target)

    def release(self, job: JobId | str | int) -> None:
        """`scontrol release`: let a held job (requeuehold, sbatch -H) start."""
        target = as_job_id(job).requeue_target()
        self._checked(["scontrol", "release", target], "scontrol release", target)

    def cancel(
        self, job: JobId | str | int, *, signal: str | None = None, batch: bool = False, full: bool = False
    ) -> None:
        """`scancel`, or with ``signal`` deliver a signal. Who gets it (scancel(1)):
        plain: the srun steps' tasks only; ``batch``: the batch shell only; ``full``: all of them.
        """
        if batch and full:
            raise UsageError("scancel: --batch and --full exclude each other")
        argv = ["scancel"]
        if signal is not None:
            argv.append(f"--signal={require_signal_name(signal)}")
        argv += ["--batch"] if batch else []
        argv += ["--full"] if full else []
        argv.append(as_job_id(job).cancel_target())
        self._checked(argv, "scancel", str(job))


# --- scontrol show job -----------------------------------------------------------------------------------

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
