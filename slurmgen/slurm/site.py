"""What a site's Slurm does to a job on preemption and at its time limit, from `scontrol show config` and
`scontrol show partition`: the mode, the grace time, whether the `--signal` user signal comes at preemption, and
the window a stop (the current step plus a save) has before SIGKILL.

Pure and standard-library only: `slurmgen doctor`, `history` and `status` use it, and so may the in-task runtime
(the batch shell records the plan of each run). The parsers live in slurmgen.slurm.site_config (the version in
slurmgen.slurm.ids) and are re-exported here. Sources, per Slurm release:

- slurm.conf(5) PreemptType, PreemptMode, KillWait, JobRequeue, and the partition's GraceTime: "its end time is
  set to the current time plus GraceTime. The job's tasks are immediately sent SIGCONT and SIGTERM ... followed by
  the SIGCONT, SIGTERM and SIGKILL signal sequence upon reaching its new end time".
- src/slurmctld/preempt.c (22.05; src/interfaces/preempt.c from 23.02) `_job_check_grace_internal`: with the user
  signal on, the `--signal` signal replaces that first SIGTERM; the grace expiry is acted on by the time-limit
  check, which runs every PERIODIC_TIMEOUT (30 s, src/slurmctld/slurmctld.h), so a grace lasts G to G + 30 s.
- src/slurmctld/node_scheduler.c `_preempt_jobs`: the user signal is on when SlurmctldParameters contains
  `preempt_send_user_signal` (19.05 to 22.05) or, from 23.02, PreemptParameters contains `send_user_signal`
  (the old spelling is still honoured, undocumented: RELEASE_NOTES of 23.02).
- src/plugins/preempt/partition_prio and qos `_job_preempt_mode`, `_get_grace_time`: the mode is the
  partition's (partition_prio) or the QOS's (qos) when set, else the cluster's, with GANG and WITHIN masked out;
  the grace time is the partition's (partition_prio) or the QOS's (qos).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurmgen.run_history import PREEMPTION, TIME_LIMIT  # the causes of a stop, named once there
from slurmgen.slurm.ids import version_tuple
from slurmgen.slurm.site_config import (
    DEFAULT_KILL_WAIT,
    NO_PREEMPTION,
    PartitionInfo,
    SiteConfig,
    default_partition,
    parse_config,
    parse_partitions,
)

__all__ = [  # the parsers' names are re-exported from site_config and ids
    "DEFAULT_KILL_WAIT",
    "NO_PREEMPTION",
    "PREEMPTION",
    "TIME_LIMIT",
    "PartitionInfo",
    "Risk",
    "SiteConfig",
    "SitePreemption",
    "default_partition",
    "misfits",
    "mode_word",
    "parse_config",
    "parse_partitions",
    "risks",
    "site_preemption",
    "site_preemption_event",
    "site_preemption_from_event",
    "user_signal_spelling",
    "version_tuple",
    "window_basis",
    "window_problems",
]  # fmt: skip

PERIODIC_TIMEOUT = 30  # src/slurmctld/slurmctld.h: time limits and grace expiries are checked this often
SIGNAL_EARLY = 60  # sbatch(1) --signal: "the signal may be sent up to 60 seconds earlier than specified"
STOPPING_MODES = frozenset({"REQUEUE", "CANCEL"})  # the modes that signal the job and end its run
QOS = "preempt/qos"
SAFE_GRACE = 60  # what to ask admins for: a save of tens of seconds plus the step in progress
HEADROOM = 30  # seconds added to a measured stop when advising a window: saves vary
MIN_WORK = 300  # seconds of a run before its time-limit signal, below which starting and resuming may not fit


@dataclass(frozen=True)
class SitePreemption:
    partition: str | None
    mode: str  # OFF, REQUEUE, CANCEL or SUSPEND: what happens to a preempted job of this partition
    grace: int  # seconds of GraceTime (0 under preempt/qos, whose grace lives in the QOS)
    user_signal: bool
    kill_wait: int
    job_requeue: bool
    windows: Mapping[str, float]  # seconds a stop (current step + save) may take, by cause
    version: str | None = None  # for the spelling of the parameters in advice
    preempt_type: str | None = None
    requeue_delay: int | None = None  # seconds a requeued run waits before it may start (site_config.requeue_delay)


# --- what happens -----------------------------------------------------------------------------------------------


def mode_word(printed: str | None) -> str:
    """The mechanism in a printed PreemptMode: GANG (time slicing) and WITHIN (a QOS option) are masked out as
    slurmctld does, so `GANG,SUSPEND` is SUSPEND and `GANG` alone preempts nothing (OFF)."""
    words = {w.strip().upper() for w in (printed or "").split(",")} - {"GANG", "WITHIN", ""}
    for word in ("SUSPEND", "REQUEUE", "CANCEL"):
        if word in words:
            return word
    return "OFF"


def site_preemption(site: SiteConfig, partition: PartitionInfo | None, lead_time: int | None) -> SitePreemption:
    """What preemption and the time limit will do to a job of ``partition`` whose `--signal` lead is ``lead_time``
    (None: no signal before the time limit)."""
    if site.preempt_type.strip().lower() in ("", NO_PREEMPTION):
        mode, grace = "OFF", 0
    elif site.preempt_type == QOS:  # the QOS's mode and grace, which only the accounting database knows
        mode, grace = mode_word(site.preempt_mode), 0
    else:
        printed = partition.preempt_mode if partition is not None and partition.preempt_mode else site.preempt_mode
        mode, grace = mode_word(printed), partition.grace_time if partition is not None else 0
    windows: dict[str, float] = {}
    if mode in STOPPING_MODES:
        # Grace 0: SIGTERM, SIGKILL KillWait later. Grace G: the first signal at preemption, SIGTERM at the end
        # of the grace (G, or up to 30 s more), SIGKILL KillWait after that. The least it can be: G + KillWait.
        windows[PREEMPTION] = float(grace + site.kill_wait)
    if lead_time:
        # The signal comes lead to lead + 30 s before the limit; at the limit the job is ended (TIMEOUT) and can
        # no longer requeue itself, so the save must be done within the lead.
        windows[TIME_LIMIT] = float(lead_time)
    return SitePreemption(
        partition=partition.name if partition is not None else None,
        mode=mode,
        grace=grace,
        user_signal=site.user_signal,
        kill_wait=site.kill_wait,
        job_requeue=site.job_requeue,
        windows=windows,
        version=site.version,
        preempt_type=site.preempt_type,
        requeue_delay=site.requeue_delay,
    )


def site_preemption_event(plan: SitePreemption) -> dict[str, Any]:
    """The plan as the `site` of a run-start event in the run history (JSON)."""
    return {
        "partition": plan.partition,
        "mode": plan.mode,
        "grace": plan.grace,
        "user_signal": plan.user_signal,
        "kill_wait": plan.kill_wait,
        "job_requeue": plan.job_requeue,
        "windows": dict(plan.windows),
        "version": plan.version,
        "preempt_type": plan.preempt_type,
        "requeue_delay": plan.requeue_delay,
    }


def site_preemption_from_event(record: Any) -> SitePreemption | None:
    """The plan of a run-start event's `site`; None when it is missing or not shaped like one."""
    if not isinstance(record, Mapping) or not isinstance(record.get("windows"), Mapping):
        return None
    try:
        windows = {str(k): float(v) for k, v in record["windows"].items()}
        return SitePreemption(
            partition=record.get("partition"),
            mode=str(record.get("mode") or "OFF"),
            grace=int(record.get("grace") or 0),
            user_signal=bool(record.get("user_signal")),
            kill_wait=int(record.get("kill_wait") or DEFAULT_KILL_WAIT),
            job_requeue=bool(record.get("job_requeue", True)),
            windows=windows,
            version=record.get("version"),
            preempt_type=record.get("preempt_type"),
            requeue_delay=int(record["requeue_delay"]) if record.get("requeue_delay") is not None else None,
        )
    except (TypeError, ValueError):
        return None


def window_basis(plan: SitePreemption, cause: str) -> str:
    """What a window is made of, in Slurm's words."""
    if cause == PREEMPTION:
        if plan.grace:
            return f"GraceTime {plan.grace} s + KillWait {plan.kill_wait} s"
        return f"KillWait {plan.kill_wait} s, no GraceTime"
    if cause == TIME_LIMIT:
        return "the --signal lead time"
    return cause


def misfits(plan: SitePreemption, save_seconds: float, step_seconds: float | None) -> list[tuple[str, float]]:
    """(cause, window) of each window that the save plus one step does not fit, the tightest first."""
    need = save_seconds + (step_seconds or 0.0)
    return sorted(((c, w) for c, w in plan.windows.items() if need > w), key=lambda cw: cw[1])


def window_problems(plan: SitePreemption, save_seconds: float, step_seconds: float | None) -> list[str]:
    """One line per window the last save plus a step does not fit; [] when all fit."""
    step = step_seconds or 0.0
    return [
        f"{cause}: the last save ({save_seconds:.1f} s) plus a step ({step:.1f} s) does not fit the "
        f"{window:g} s window ({window_basis(plan, cause)})"
        for cause, window in misfits(plan, save_seconds, step_seconds)
    ]


# --- advice -------------------------------------------------------------------------------------------------------


def user_signal_spelling(version: str | None) -> str:
    """The slurm.conf line that sends the `--signal` user signal at preemption, for this Slurm version."""
    known = version_tuple(version)
    if known is None:
        return (
            "PreemptParameters=send_user_signal (Slurm 23.02 and later; "
            "SlurmctldParameters=preempt_send_user_signal up to 22.05)"
        )
    if known >= (23, 2):
        return "PreemptParameters=send_user_signal"
    if known >= (19, 5):
        return "SlurmctldParameters=preempt_send_user_signal"
    return "SlurmctldParameters=preempt_send_user_signal (needs Slurm 19.05 or later)"


@dataclass(frozen=True)
class Risk:
    what: str
    fix: str


def grace_to_ask(plan: SitePreemption, save: float | None, step: float | None) -> int:
    """The GraceTime to ask for: SAFE_GRACE, or more when the measured stop (with HEADROOM) needs it."""
    if save is None:
        return SAFE_GRACE
    return max(SAFE_GRACE, math.ceil(save + (step or 0.0)) + HEADROOM - plan.kill_wait)


def _window_risks(plan: SitePreemption, save: float, step: float | None, part: str) -> list[Risk]:
    found = []
    need = math.ceil(save + (step or 0.0)) + HEADROOM
    for (cause, _), line in zip(misfits(plan, save, step), window_problems(plan, save, step), strict=True):
        if cause == TIME_LIMIT:
            fix = f"raise preemption.lead_time to at least {need} s, or save faster"
        else:
            grace = grace_to_ask(plan, save, step)
            fix = f"make the save faster or smaller, or ask your admins for GraceTime >= {grace} on {part}"
        found.append(Risk(f"SIGKILL mid-save: {line}", fix))
    return found


def _signal_risks(plan: SitePreemption, spelling: str, part: str, grace: int) -> list[Risk]:
    """How a stopping preemption reaches the job: the signal, and the time it leaves."""
    found = []
    if not plan.user_signal:
        whom = "the tasks only, not the batch shell" if plan.grace else "the batch shell and the tasks"
        found.append(Risk(
            f"no user signal at preemption: the job learns of it only from SIGTERM (to {whom}); slurmgen's runtime "
            "takes a TERM during a preemption as the preemption and saves, but a program without it must save on "
            "SIGTERM",
            f"ask your admins for {spelling}, so that the --signal signal reaches the batch shell at preemption",
        ))  # fmt: skip
    if plan.preempt_type == QOS:
        found.append(Risk(
            f"PreemptType=preempt/qos: the mode and GraceTime come from the job's QOS, which doctor cannot read "
            f"without the accounting database; it assumes PreemptMode={plan.mode} and no grace, so the current "
            f"step plus the save must fit KillWait ({plan.kill_wait} s)",
            "ask your admins: sacctmgr show qos format=Name,PreemptMode,GraceTime",
        ))  # fmt: skip
    elif not plan.grace:
        found.append(Risk(
            f"GraceTime=0 on {part}: a preemption sends SIGTERM, and SIGKILL KillWait ({plan.kill_wait} s) later; "
            f"the current step plus the save must fit {plan.kill_wait} s",
            f"ask your admins for GraceTime >= {grace} on {part}",
        ))  # fmt: skip
    return found


def lead_time_risk(lead_time: int | None, time_limit: int | None) -> Risk | None:
    """A lead time so near the time limit that a run may be signalled before it can start and resume (the spec
    alone decides it: doctor checks it with or without a cluster)."""
    if not lead_time or not time_limit or time_limit - lead_time - SIGNAL_EARLY >= MIN_WORK:
        return None
    earliest = max(0, time_limit - lead_time - SIGNAL_EARLY)
    return Risk(
        f"a lead time of {lead_time} s is near the {time_limit} s time limit: the signal may come up to "
        f"{SIGNAL_EARLY} s early (sbatch(1) --signal), {earliest} s into a run; a run that needs longer to start "
        "and resume is requeued before it makes progress, again and again",
        f"lower preemption.lead_time to at most {max(0, time_limit - SIGNAL_EARLY - MIN_WORK)} s, or give a "
        "longer time",
    )


def risks(
    plan: SitePreemption,
    lead_time: int | None,
    save_seconds: float | None,
    step_seconds: float | None,
    *,
    time_limit: int | None = None,
) -> list[Risk]:
    """One Risk (what can go wrong, and its fix) per weakness of the plan for a job; the gravest first.

    ``time_limit`` (seconds) adds the check of the lead time against it."""
    spelling = user_signal_spelling(plan.version)
    part = f"partition {plan.partition}" if plan.partition else "the partition"
    grace = grace_to_ask(plan, save_seconds, step_seconds)
    found: list[Risk] = []
    if plan.mode == "CANCEL":
        wanted = ["PreemptMode=REQUEUE"]
        wanted += [f"GraceTime >= {grace} on {part}"] if plan.grace < grace else []
        wanted += [f"the user signal ({spelling})"] if not plan.user_signal else []
        found.append(Risk(
            "PreemptMode=CANCEL: Slurm cancels a preempted job (state PREEMPTED) and never requeues it; its work "
            "continues only through slurmgen's requeue of the preempted job by the batch shell",
            "ask your admins for " + ", ".join(wanted[:-1]) + (" and " if len(wanted) > 1 else "") + wanted[-1],
        ))  # fmt: skip
    if save_seconds is not None:
        found += _window_risks(plan, save_seconds, step_seconds, part)
    if plan.mode in STOPPING_MODES:
        found += _signal_risks(plan, spelling, part, grace)
    if (near := lead_time_risk(lead_time, time_limit)) is not None:
        found.append(near)
    if not plan.job_requeue:
        found.append(Risk(
            "JobRequeue=0: Slurm requeues only the jobs that ask for it",
            "nothing to do: slurmgen writes #SBATCH --requeue into every job with preemption on",
        ))  # fmt: skip
    if plan.mode == "SUSPEND":  # slurmstepd sends SIGTSTP, then SIGSTOP (src/slurmd/slurmstepd/req.c)
        found.append(Risk(
            "PreemptMode=SUSPEND: a preempted job is stopped (SIGTSTP, then SIGSTOP) and resumed later in place",
            "nothing to do: the job neither saves nor requeues",
        ))  # fmt: skip
    return found
