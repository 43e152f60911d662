"""Parsing `scontrol show config` and `scontrol show partition` into what slurmgen.slurm.site decides on.

Pure and standard-library only. `show config` prints `Key = value` lines with padded keys (src/api/config_info.c);
`show partition` prints `Key=value` fields, one line per partition with `-o`, else a block of indented lines
(src/api/partition_info.c), and shows the cluster's PreemptMode for a partition that sets none. Pinned by the
recorded output in tests/data/slurm/show-config*.out and show-partition*.out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmgen.errors import SchedulerError
from slurmgen.slurm.ids import version_tuple

DEFAULT_KILL_WAIT = 30  # slurm.conf(5) KillWait
NO_PREEMPTION = "preempt/none"
# How long a requeued job waits before it may start again. src/slurmctld/job_mgr.c (`_requeue_delay` from 25.11,
# inline before): the job's BeginTime becomes now + delay + 1, the delay being SchedulerParameters=requeue_delay=
# (slurm.conf(5), 25.11 on) or else the credential lifetime, AuthInfo=cred_expire= (at least 5, else ignored;
# src/interfaces/cred.c, src/common/slurm_cred.c before 23.11), whose default DEFAULT_EXPIRATION_WINDOW is 120 s.
DEFAULT_CRED_EXPIRE = 120
MIN_CRED_EXPIRE = 5
REQUEUE_DELAY_SINCE = (25, 11)
# sbatch(1) --requeue[=expedite], slurm.conf(5) SlurmctldParameters=enable_expedited_requeue: both from 25.11.
EXPEDITE_SINCE = (25, 11)


@dataclass(frozen=True)
class SiteConfig:
    version: str | None  # SLURM_VERSION
    kill_wait: int  # KillWait, seconds
    job_requeue: bool  # JobRequeue
    preempt_type: str  # PreemptType, e.g. preempt/none, preempt/partition_prio, preempt/qos
    preempt_mode: str  # the cluster's PreemptMode as Slurm prints it, e.g. OFF, REQUEUE, CANCEL, GANG,SUSPEND
    user_signal: bool  # the --signal user signal is sent at preemption time
    raw: Mapping[str, str] = field(compare=False, hash=False, repr=False)
    requeue_delay: int = DEFAULT_CRED_EXPIRE  # seconds a requeued job waits (one more, in fact) before it may start
    requeue_delay_from: str = "Slurm's default"  # which setting gave requeue_delay, in slurm.conf's words
    expedited_requeue: bool = False  # SlurmctldParameters=enable_expedited_requeue on a Slurm that knows it


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    preempt_mode: str | None  # as printed; scontrol shows the cluster's mode for a partition that sets none
    grace_time: int
    priority_tier: int
    default: bool
    raw: Mapping[str, str] = field(compare=False, hash=False, repr=False)
    # slurm.conf(5) DefaultTime and MaxTime in seconds; None where scontrol prints NONE, UNLIMITED or nothing
    default_time: int | None = None
    max_time: int | None = None


# --- scontrol show config ------------------------------------------------------------------------------------

_CONFIG_LINE = re.compile(r"^([^\s=]+)\s*=\s?(.*?)\s*$")


def _unset(value: str | None) -> bool:
    return value is None or value.strip() in ("", "(null)")


def _int(value: str | None, default: int) -> int:
    match = re.match(r"\s*(\d+)", value or "")
    return int(match[1]) if match else default


def _option(parameters: str | None, name: str) -> str | None:
    """One `name=value` of a comma-separated parameter list (SchedulerParameters, AuthInfo), or None."""
    if _unset(parameters):
        return None
    for word in str(parameters).split(","):
        key, sep, value = word.strip().partition("=")
        if sep and key.lower() == name:
            return value.strip()
    return None


def requeue_delay(raw: Mapping[str, str], version: str | None) -> tuple[int, str]:
    """(the delay's seconds, where they come from): see DEFAULT_CRED_EXPIRE; Slurm adds one second to it
    (`now + delay + 1`). An unknown version is taken as a new one."""
    new = (version_tuple(version) or (99, 0)) >= REQUEUE_DELAY_SINCE
    explicit = _option(raw.get("SchedulerParameters"), "requeue_delay") if new else None
    if explicit is not None and re.fullmatch(r"\d+", explicit):
        return int(explicit), f"SchedulerParameters=requeue_delay={explicit}"
    expire = _option(raw.get("AuthInfo"), "cred_expire")
    if expire is not None and re.fullmatch(r"\d+", expire) and int(expire) >= MIN_CRED_EXPIRE:
        return int(expire), f"AuthInfo=cred_expire={expire}"
    return DEFAULT_CRED_EXPIRE, f"Slurm's default (AuthInfo cred_expire {DEFAULT_CRED_EXPIRE} s)"


def parse_config(text: str) -> SiteConfig:
    """`scontrol show config`: `Key = value` lines (padded keys; later sections such as cgroup's come after the
    main one, so the first value of a key wins)."""
    raw: dict[str, str] = {}
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line)
        if match:
            raw.setdefault(match[1], match[2])
    if "SLURM_VERSION" not in raw and "KillWait" not in raw:
        first = text.strip().splitlines()[0][:120] if text.strip() else "nothing"
        raise SchedulerError(f"scontrol show config: no configuration in its output (it printed {first!r})")
    version = None if _unset(raw.get("SLURM_VERSION")) else raw["SLURM_VERSION"]
    ctld = "" if _unset(raw.get("SlurmctldParameters")) else raw["SlurmctldParameters"].lower()
    preempt = "" if _unset(raw.get("PreemptParameters")) else raw["PreemptParameters"].lower()
    # src/slurmctld/node_scheduler.c `_preempt_jobs` matches substrings, case-insensitively (xstrcasestr): the
    # SlurmctldParameters spelling in every release since 19.05, the PreemptParameters one from 23.02 (an unknown
    # version is taken as a new one: a release that prints PreemptParameters has it).
    user_signal = "preempt_send_user_signal" in ctld
    if (version_tuple(version) or (99, 0)) >= (23, 2):
        user_signal = user_signal or "send_user_signal" in preempt
    delay, delay_from = requeue_delay(raw, version)
    # src/slurmctld/job_mgr.c `_expedited_requeue_enabled`: a substring of SlurmctldParameters, as for the signal.
    expedite = (version_tuple(version) or (99, 0)) >= EXPEDITE_SINCE and "enable_expedited_requeue" in ctld
    return SiteConfig(
        version=version,
        kill_wait=_int(raw.get("KillWait"), DEFAULT_KILL_WAIT),
        job_requeue=_int(raw.get("JobRequeue"), 1) != 0,
        preempt_type=NO_PREEMPTION if _unset(raw.get("PreemptType")) else raw["PreemptType"].strip(),
        preempt_mode="OFF" if _unset(raw.get("PreemptMode")) else raw["PreemptMode"].strip().upper(),
        user_signal=user_signal,
        requeue_delay=delay,
        requeue_delay_from=delay_from,
        expedited_requeue=expedite,
        raw=raw,
    )


# --- scontrol show partition -----------------------------------------------------------------------------------


def _partition_fields(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    last: str | None = None
    for token in " ".join(lines).split():
        key, sep, value = token.partition("=")
        if sep and key:
            fields.setdefault(key, value)
            last = key
        elif last is not None:  # a value with a blank in it: keep it whole
            fields[last] += " " + token
    return fields


def _limit(value: str | None) -> int | None:
    """A partition's DefaultTime or MaxTime: seconds, or None for NONE, UNLIMITED or a form that is not Slurm's."""
    from slurmgen.slurm.times import parse_time

    if _unset(value) or str(value).strip().upper() == "NONE":
        return None
    try:
        return parse_time(str(value))
    except ValueError:
        return None


def parse_partitions(text: str) -> list[PartitionInfo]:
    """`scontrol show partition`: one line per partition with `-o`, else a block of indented lines each."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("PartitionName="):
            blocks.append([line])
        elif not line.strip() or line.strip() == "No partitions in the system":
            continue
        elif line[0].isspace() and blocks:
            blocks[-1].append(line)
        else:
            raise SchedulerError(f"scontrol show partition: unexpected line {line[:200]!r}")
    out = []
    for block in blocks:
        raw = _partition_fields(block)
        mode = raw.get("PreemptMode")
        out.append(
            PartitionInfo(
                name=raw["PartitionName"],
                preempt_mode=None if _unset(mode) else str(mode).upper(),
                grace_time=_int(raw.get("GraceTime"), 0),
                priority_tier=_int(raw.get("PriorityTier"), 1),
                default=raw.get("Default", "").upper() == "YES",
                raw=raw,
                default_time=_limit(raw.get("DefaultTime")),
                max_time=_limit(raw.get("MaxTime")),
            )
        )
    return out


def default_partition(partitions: list[PartitionInfo]) -> PartitionInfo | None:
    return next((p for p in partitions if p.default), None)
