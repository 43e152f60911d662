"""How Slurm writes a job's id, its state and a value: parsing, validation, and the forms each command expects.

Pure and standard-library only (the in-task runtime imports this). Id forms follow Slurm's job_array.shtml and
heterogeneous_jobs.shtml:
``123``, ``123_4`` (array task), ``123_[1-3%2]`` (pending array tasks as squeue shows them), ``123+1``
(heterogeneous job component), each optionally with a step suffix ``.batch``, ``.extern``, ``.0``.

The words for a value (below the states): durations, local datetimes, the words for "no value", counts that may
carry a suffix, and release versions. One reading of each for every parser (parse.py, client.py's `scontrol show
job`, array_queue.py, site_config.py) and for the batch shell, which reads the site's recorded version back.
Pinned by the recorded output of every Slurm version in tests/data/slurm/<version>/.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime

from slurmgen.errors import RuntimeSetupError, UsageError

# Slurm job ids are uint32 (federated ids use the high bits); 0 is never a job.
_MAX_ID = 2**32 - 1
_RANGE = r"\d+(?:-\d+)?(?::\d+)?"  # 3, 3-7, 3-7:2
_ARRAY_SPEC = rf"{_RANGE}(?:,{_RANGE})*(?:%\d+)?"  # 2-7,12-17,22%56
_STEP = r"batch|extern|interactive|\d+"
_JOB_ID = re.compile(
    rf"(?P<job>\d{{1,10}})"
    rf"(?:_(?P<task>\d{{1,10}})|_\[(?P<tasks>{_ARRAY_SPEC})\]|\+(?P<het>\d{{1,10}}))?"
    rf"(?:\.(?P<step>{_STEP}))?"
)


@dataclass(frozen=True)
class JobId:
    """One job as a user names it. ``str()`` gives Slurm's own spelling back."""

    job: int  # the job id; for an array the array job id, for a het job the leader's id
    array_task: int | None = None  # one array task: 123_4
    array_tasks: str | None = None  # pending array tasks, as squeue shows them: "1-3%2" in 123_[1-3%2]
    het_offset: int | None = None  # one het component: 123+1
    step: str | None = None  # "batch", "extern", "interactive" or a step number; None for the job itself

    def __post_init__(self) -> None:
        if not 0 < self.job <= _MAX_ID:
            raise UsageError(f"job id out of range: {self.job}")
        forms = [self.array_task, self.array_tasks, self.het_offset]
        if sum(f is not None for f in forms) > 1:
            raise UsageError(f"a job id is one of array task, array range, het component: {self!r}")
        if self.array_tasks is not None and not re.fullmatch(_ARRAY_SPEC, self.array_tasks):
            raise UsageError(f"not an array task range: {self.array_tasks!r}")
        if self.step is not None and not re.fullmatch(_STEP, self.step):
            raise UsageError(f"not a job step: {self.step!r}")

    def __str__(self) -> str:
        text = str(self.job)
        if self.array_task is not None:
            text += f"_{self.array_task}"
        elif self.array_tasks is not None:
            text += f"_[{self.array_tasks}]"
        elif self.het_offset is not None:
            text += f"+{self.het_offset}"
        return text if self.step is None else f"{text}.{self.step}"

    def without_step(self) -> JobId:
        return JobId(self.job, self.array_task, self.array_tasks, self.het_offset)

    def requeue_target(self) -> str:
        """The id to pass to ``scontrol requeue``/``requeuehold``/``release``.

        An array task is named ``<array_job>_<task>``: the bare array job id would requeue every task of the array
        (Lightning #15022; scontrol(1): an update of the ArrayJobID affects every task). A het job is requeued as a
        whole through its leader's id. The step suffix is dropped: requeue acts on jobs. A range of pending tasks cannot
        be requeued.
        """
        if self.array_tasks is not None:
            raise UsageError(f"{self} is a range of pending array tasks; name one task, e.g. {self.job}_N")
        task = "" if self.array_task is None else str(self.array_task)
        key = job_key_of(str(self.job), str(self.job) if task else "", task)  # the one job-key rule
        assert key is not None  # a JobId always names a job
        return key

    def cancel_target(self) -> str:
        """The id to pass to ``scancel``: any form scancel accepts, steps and ranges included."""
        return str(self)


def job_key_of(job_id: str, array_job: str = "", array_task: str = "") -> str | None:
    """The id that names this job to ``scontrol``: ``<array job>_<task>`` for an array task, else the job id.

    Requeueing an array task by its bare SLURM_JOB_ID is right, but by SLURM_ARRAY_JOB_ID alone requeues the
    whole array (Lightning #15022); ``A_T`` is unambiguous. None outside Slurm (no job id).
    """
    parts = [array_job, array_task] if array_job and array_task else [job_id]
    if not parts[0]:
        return None
    for part in parts:
        if not (part.isdigit() and part.isascii()):
            raise RuntimeSetupError(f"job id {part!r} is not a number (SLURM_JOB_ID / SLURM_ARRAY_*)")
    return "_".join(parts)


def parse_job_id(text: str | int) -> JobId:
    """Parse a job id in any form Slurm prints; anything else is a UsageError.

    The whole text must match (no shell metacharacters, spaces inside or extra lines), so a parsed id is
    safe to pass to scontrol and scancel as one argument.
    """
    if isinstance(text, int):
        return JobId(text)
    match = _JOB_ID.fullmatch(text.strip())
    if match is None:
        raise UsageError(f"not a Slurm job id: {text!r} (expected e.g. 123, 123_4, 123_[1-3%2], 123+1 or 123.batch)")
    task, het = match["task"], match["het"]
    return JobId(
        job=int(match["job"]),
        array_task=None if task is None else int(task),
        array_tasks=match["tasks"],
        het_offset=None if het is None else int(het),
        step=match["step"],
    )


# --- a job of one cluster of a multi-cluster site ---------------------------------------------------------

# `sbatch --parsable -M name` answers `123;name` (src/sbatch/sbatch.c prints ";%s" with working_cluster_rec->name
# when a cluster was named), and every later command must name that cluster again (`-M name`), or it asks the
# local cluster, which knows no job 123 or another job 123. slurmgen shows such a job as `name:123` (no `;`, which
# the shell reads as the end of a command) and also reads Slurm's own `123;name`. A cluster name as slurm.conf's
# ClusterName writes it: letters, digits, `_`, `-` and `.`.
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
CLUSTER_SEPARATOR = ":"


def check_cluster_name(name: str, where: str = "cluster") -> str:
    """``name`` as given when it is a Slurm cluster name, else a UsageError saying what one looks like."""
    if not _CLUSTER_NAME.fullmatch(name):
        raise UsageError(f"{where}: not a Slurm cluster name: {name!r} (letters, digits, '_', '-', '.'; e.g. alpha)")
    return name


def split_cluster(text: str) -> tuple[str | None, str]:
    """(cluster, the rest) of ``name:123`` and of Slurm's ``123;name``; (None, text) for any other text. Only the
    cluster's form is checked here: the rest is parsed by whoever reads it (a job id, a sweep id)."""
    text = text.strip()
    head, sep, tail = text.partition(CLUSTER_SEPARATOR)
    if sep and _CLUSTER_NAME.fullmatch(head) and tail[:1].isdigit():
        return head, tail
    head, sep, tail = text.partition(";")
    if sep and _CLUSTER_NAME.fullmatch(tail) and head[:1].isdigit():
        return tail, head
    return None, text


def parse_cluster_job(text: str | int) -> tuple[str | None, JobId]:
    """A job id with the cluster it belongs to, if named (``alpha:123``, ``123;alpha``, or a plain ``123_4``)."""
    if isinstance(text, int):
        return None, JobId(text)
    cluster, rest = split_cluster(text)
    return cluster, parse_job_id(rest)


def cluster_label(cluster: str | None, job: JobId | str) -> str:
    """How a job is shown: ``alpha:123`` on a named cluster, else Slurm's id alone."""
    return str(job) if not cluster else f"{cluster}{CLUSTER_SEPARATOR}{job}"


# A job run on this machine by `slurmgen run` is named `local-<n>`: its number is not Slurm's, and a bare `2` always
# means the cluster's job 2.
LOCAL_PREFIX = "local-"


def parse_local_id(text: str) -> str | None:
    """``local-2`` -> ``"2"``, and a local array task ``local-2_1`` -> ``"2_1"`` (as Slurm names an array task by its
    array's id); None for any other form (a Slurm id, a spec); a UsageError for a bad local id."""
    text = text.strip()
    if not text.lower().startswith(LOCAL_PREFIX):
        return None
    number, _, task = text[len(LOCAL_PREFIX) :].partition("_")
    parts = [number, task] if _ else [number]
    if not all(p.isdigit() and p.isascii() and int(p) <= _MAX_ID for p in parts) or int(number) == 0:
        raise UsageError(f"not a local job id: {text!r} (expected local-N, as `slurmgen run` printed it)")
    return "_".join(str(int(p)) for p in parts)


def local_label(job_id: str) -> str:
    """How a local job is named to the user: ``local-2``."""
    return f"{LOCAL_PREFIX}{job_id}"


def as_job_id(value: JobId | str | int) -> JobId:
    return value if isinstance(value, JobId) else parse_job_id(value)


# A run's own id (sacct(1) of 25.11, SLUID: it "changes each time a job is requeued/restarted/resized"): "s" and 13
# characters of Crockford's base32 (src/common/sluid.c, cb32map "0123456789ABCDEFGHJKMNPQRSTVWXYZ").
_SLUID = re.compile(r"[sS][0-9A-HJKMNP-TV-Z]{13}")


def parse_sluid(text: str | None) -> str | None:
    """A SLUID as Slurm prints it (``s731M834YGW200``); None for anything else (empty, ``(null)``, a job id)."""
    value = (text or "").strip()
    return value if _SLUID.fullmatch(value) else None


# --- states -----------------------------------------------------------------------------------------------


class JobState(enum.Enum):
    """Slurm's ~25 job states folded into what callers decide on. ``UNKNOWN`` for anything new."""

    PENDING = "pending"  # waiting to start, including a requeued job waiting out its BeginTime
    HELD = "held"  # pending but needs `scontrol release` (requeuehold, special exit)
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETING = "completing"  # not final: a requeued job passes through it (submitit #1788)
    PREEMPTED = "preempted"  # not final: with PreemptMode=REQUEUE the job comes back (reframe #3608)
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"

    @property
    def is_terminal(self) -> bool:
        """The job will not run again by itself (a later `scontrol requeue` can still restart it)."""
        return self in _TERMINAL

    @property
    def is_active(self) -> bool:
        """The job is queued, held, running or winding down; it still holds or wants resources."""
        return self in _ACTIVE


_TERMINAL = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})
_ACTIVE = frozenset({JobState.PENDING, JobState.HELD, JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING})

# Long names (scontrol JobState=, squeue %T, sacct) and squeue's compact codes (%t), from squeue(1)
# "JOB STATE CODES". REQUEUED/REQUEUE_FED are transient on the way back to PENDING.
_STATES: dict[str, JobState] = {}
for _state, _names in {
    JobState.PENDING: "PENDING PD CONFIGURING CF REQUEUED RQ REQUEUE_FED RF RESIZING RS",
    JobState.HELD: "REQUEUE_HOLD RH SPECIAL_EXIT SE RESV_DEL_HOLD RD",
    JobState.RUNNING: "RUNNING R SIGNALING SI STAGE_OUT SO",
    JobState.SUSPENDED: "SUSPENDED S STOPPED ST",
    JobState.COMPLETING: "COMPLETING CG",
    JobState.PREEMPTED: "PREEMPTED PR",
    JobState.COMPLETED: "COMPLETED CD",
    JobState.FAILED: "FAILED F NODE_FAIL NF BOOT_FAIL BF OUT_OF_MEMORY OOM DEADLINE DL",
    JobState.CANCELLED: "CANCELLED CA REVOKED RV",
    JobState.TIMEOUT: "TIMEOUT TO",
}.items():
    _STATES.update(dict.fromkeys(_names.split(), _state))


def state_name(text: str) -> str:
    """Slurm's state word alone: ``CANCELLED by 0`` and ``CANCELLED+`` (sacct) give ``CANCELLED``."""
    words = text.split()
    return words[0].rstrip("+").upper() if words else ""


def parse_state(text: str) -> JobState:
    return _STATES.get(state_name(text), JobState.UNKNOWN)


# --- the words for a value ------------------------------------------------------------------------------

_NONE_WORDS = frozenset({"", "(null)", "None", "N/A", "Unknown", "UNLIMITED", "INFINITE", "NOT_SET", "INVALID"})
_DURATION = re.compile(r"(?:(?P<d>\d+)-)?(?:(?:(?P<h>\d+):)?(?P<m>\d+):)?(?P<s>\d+)")


def parse_duration(text: str) -> int | None:
    """Seconds from Slurm's ``[days-][hours:]minutes:seconds`` (RunTime=, TimeLimit=, squeue %M/%l).

    None for UNLIMITED and the other "no value" words, and for anything unparseable.
    """
    match = _DURATION.fullmatch(text.strip())
    if text.strip() in _NONE_WORDS or match is None or (match["m"] is None and match["d"] is None):
        return None
    d, h, m, s = (int(match[k] or 0) for k in "dhms")
    return ((d * 24 + h) * 60 + m) * 60 + s


def parse_datetime(text: str) -> datetime | None:
    """Slurm's local-time ``2026-11-21T08:01:39``; None for Unknown/None/N/A."""
    if text.strip() in _NONE_WORDS:
        return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def optional(text: str | None) -> str | None:
    return None if text is None or text.strip() in _NONE_WORDS else text


def leading_int(text: str | None) -> int | None:
    match = re.match(r"\d+", text or "")
    return int(match[0]) if match else None


def version_tuple(version: str | None) -> tuple[int, int] | None:
    """(22, 5) for "22.05.8"; None when unknown."""
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(match[1]), int(match[2])) if match else None
