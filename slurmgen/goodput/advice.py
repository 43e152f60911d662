"""Checkpoint-interval advice from what a job measured: its blocking save cost C, its mean time between
interruptions M and what an interruption costs to come back from R (start-up, restore, recovery).

- Young (1974), "A first order approximation to the optimum checkpoint interval": T = sqrt(2 C M).
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps" (FGCS 22):
  T = sqrt(2 C M) (1 + sqrt(C / (2 M)) / 3 + C / (18 M)) - C when C < 2 M, else T = M.
- Expected goodput at an interval T, Daly's complete model of the wall time for a work time W:
  wall = M e^(R/M) (e^((T + C)/M) - 1) W / T, so goodput = T / (M e^(R/M) (e^((T + C)/M) - 1)).
  Without interruptions (M -> infinity) it is T / (T + C), the cost of saving alone.

The same formulas as LLNL SCR's scr_ckpt_interval.py. Pure: numbers in, numbers out.

M is this job's own while it has seen ENOUGH interruptions; before that, the rate of every journal job on the same
cluster and partition pooled with it (pooled_rate), and the advice says which (Advice.basis).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace


def young(save_seconds: float, mtbf_seconds: float) -> float:
    return math.sqrt(2.0 * save_seconds * mtbf_seconds)


def daly(save_seconds: float, mtbf_seconds: float) -> float:
    c, m = save_seconds, mtbf_seconds
    if c >= 2.0 * m:
        return m
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(c / (2.0 * m)) / 3.0 + c / (18.0 * m)) - c


def expected_goodput(interval: float, save_seconds: float, mtbf_seconds: float | None, restart_seconds: float = 0.0
                     ) -> float:  # fmt: skip
    """The fraction of the wall time that trains, saving every ``interval`` seconds of work (Daly's model)."""
    t, c, r = interval, save_seconds, restart_seconds
    if t <= 0:
        return 0.0
    if mtbf_seconds is None or mtbf_seconds <= 0 or math.isinf(mtbf_seconds):
        return t / (t + c)
    m = mtbf_seconds
    try:
        return t / (m * math.exp(r / m) * math.expm1((t + c) / m))
    except OverflowError:
        return 0.0


@dataclass(frozen=True)
class Advice:
    save_seconds: float  # C: the mean blocking save
    mtbf_seconds: float | None  # M: run time over interruptions; None when none was seen
    interruptions: int
    observed_seconds: float  # the run time M was measured over
    restart_seconds: float  # R: the mean cost of coming back from an interruption
    interval_seconds: float | None  # the current interval between periodic saves; None with fewer than two
    young_seconds: float | None
    daly_seconds: float | None
    goodput_now: float | None
    goodput_optimum: float | None
    time_limit_seconds: float | None
    last_save_by_seconds: float | None  # after a run's start: the latest start of its last save before the limit
    basis: str  # where M comes from: "this job" or "N jobs on cluster/partition"
    requeue_delay_seconds: float = 0.0  # the site's requeue delays the job waited out, counted in R

    def lines(self) -> list[str]:
        """The advice in plain lines (report, doctor)."""
        out = [f"save cost {self.save_seconds:.1f} s (blocking, mean)"]
        if self.mtbf_seconds is None:
            seen = duration_text(self.observed_seconds)
            out.append(f"no interruption seen in {seen} of runs ({self.basis}): no optimum yet")
        else:
            out.append(
                f"mean time between interruptions {duration_text(self.mtbf_seconds)} ({self.interruptions} in "
                f"{duration_text(self.observed_seconds)}, {self.basis}); restart cost {self.restart_seconds:.0f} s"
                + (f" (with Slurm's requeue delay, {self.requeue_delay_seconds:.0f} s in all)"
                   if self.requeue_delay_seconds else "")
            )  # fmt: skip
        if self.young_seconds is not None and self.daly_seconds is not None:
            young, daly = duration_text(self.young_seconds), duration_text(self.daly_seconds)
            out.append(f"optimum save interval: Young {young}, Daly {daly}")
        if self.interval_seconds is not None and self.goodput_now is not None:
            out.append(
                f"current interval {duration_text(self.interval_seconds)}: expected goodput {self.goodput_now:.1%}"
            )
        if self.goodput_optimum is not None:
            out.append(f"at Daly's optimum: expected goodput {self.goodput_optimum:.1%}")
        if self.last_save_by_seconds is not None and self.time_limit_seconds is not None:
            out.append(f"last save before the time limit ({duration_text(self.time_limit_seconds)}): start it by "
                       f"{duration_text(self.last_save_by_seconds)} into the run")  # fmt: skip
        return out


def duration_text(seconds: float) -> str:
    s = round(seconds)
    if s < 120:
        return f"{seconds:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def advise(save_seconds: float, interruptions: int, observed_seconds: float, restart_seconds: float,
           interval_seconds: float | None, time_limit_seconds: float | None, step_seconds: float | None,
           basis: str = "this job", requeue_delay_seconds: float = 0.0) -> Advice:  # fmt: skip
    """The advice from measured numbers (see the module's doc for the formulas)."""
    mtbf = observed_seconds / interruptions if interruptions > 0 and observed_seconds > 0 else None
    y = d = now = best = None
    if mtbf is not None and save_seconds > 0:
        y, d = young(save_seconds, mtbf), daly(save_seconds, mtbf)
        best = expected_goodput(d, save_seconds, mtbf, restart_seconds)
    if interval_seconds is not None:
        now = expected_goodput(interval_seconds, save_seconds, mtbf, restart_seconds)
    last = None
    if time_limit_seconds is not None:
        # The save must be durable before the limit, with a step to reach the step boundary it starts at.
        last = max(time_limit_seconds - save_seconds - (step_seconds or 0.0), 0.0)
    return Advice(save_seconds, mtbf, interruptions, observed_seconds, restart_seconds, interval_seconds,
                  y, d, now, best, time_limit_seconds, last, basis, requeue_delay_seconds)  # fmt: skip


ENOUGH = 3  # interruptions: below this, one job's mean time between them is mostly chance


def pooled_rate(own: tuple[int, float], peers: Sequence[tuple[int, float]], where: str) -> tuple[int, float, str]:
    """(interruptions, observed seconds, basis) for M: `own` (this job's interruptions and run time) while it has
    ENOUGH interruptions or no peer helps, else `own` plus every peer's (other journal jobs on `where`, the
    cluster and partition), when together they have more interruptions than this job alone."""
    n, seconds = own
    helping = [(k, s) for k, s in peers if s > 0]
    if n >= ENOUGH or not helping:
        return n, seconds, "this job"
    total = n + sum(k for k, _ in helping)
    if total <= n:
        return n, seconds, "this job"
    return total, seconds + sum(s for _, s in helping), f"this job and {len(helping)} other job(s) on {where}"


def rebased(a: Advice, interruptions: int, observed_seconds: float, basis: str) -> Advice:
    """`a` with its interruption rate measured over another basis (pooled_rate); the save cost, the interval,
    the restart cost and the last save before the limit stay this job's."""
    mtbf = observed_seconds / interruptions if interruptions > 0 and observed_seconds > 0 else None
    y = d = best = None
    if mtbf is not None and a.save_seconds > 0:
        y, d = young(a.save_seconds, mtbf), daly(a.save_seconds, mtbf)
        best = expected_goodput(d, a.save_seconds, mtbf, a.restart_seconds)
    now = None
    if a.interval_seconds is not None:
        now = expected_goodput(a.interval_seconds, a.save_seconds, mtbf, a.restart_seconds)
    return replace(a, mtbf_seconds=mtbf, interruptions=interruptions, observed_seconds=observed_seconds,
                   young_seconds=y, daly_seconds=d, goodput_now=now, goodput_optimum=best, basis=basis)  # fmt: skip
