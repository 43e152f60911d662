"""The spec's `recovery:` section: what the batch shell does when the step fails inside a running allocation.

The names are the contract (docs/reliability.md, "When things fail"): `max_restarts`, `hang_timeout`, `spare_nodes`,
`health_check`, `expedite`. `recovery: false` switches restarts and the hang watchdog off. Defaults are safe: a
crashed step is started again inside the allocation up to 3 times (a repeated failure, the same error at the same
saved state, is never restarted: slurmgen/interruption/), and the hang timeout is generous (30 minutes) so that a
slow start (loading a model, compiling) is never taken for a hang.
"""

from __future__ import annotations

import shlex
from typing import Any

from slurmgen.spec.types import AnyOf, Bool, Ctx, Field, Int, List, Obj, Str

DEFAULT_MAX_RESTARTS = 3
DEFAULT_HANG_TIMEOUT = 1800  # seconds; 0 switches the watchdog off

RECOVERY = Obj(
    {
        "enabled": Field(
            Bool(), "false switches restarts and the hang watchdog off (same as `recovery: false`)", default=True
        ),
        "max_restarts": Field(
            Int(min=0, max=1000),
            "restarts of the step inside the allocation per run, after a crash; past it the job is requeued if "
            "preemption.requeue_on_failure allows, else it ends with the program's exit code",
            default=DEFAULT_MAX_RESTARTS,
        ),
        "hang_timeout": Field(
            Int(min=0, max=7 * 86400),
            "seconds without progress on any rank before the step counts as hung (0: no watchdog); allow for "
            "start-up and the longest save",
            default=DEFAULT_HANG_TIMEOUT,
        ),
        "spare_nodes": Field(
            Int(min=0, max=1000),
            "extra nodes allocated beyond `nodes` (sbatch --nodes is their sum), to replace a node that fails its "
            "checks or that Slurm marks down",
            default=0,
        ),
        "health_check": Field(
            AnyOf(
                ((str, Str(max_len=65536)), (list, List(Str(max_len=65536), min_items=1))),
                "a command line or a list of arguments",
            ),
            "runs once on every node before every start of the step (with a time limit); a non-zero exit marks the "
            "node bad: a spare takes its place, else the job is requeued away from it",
        ),
        "expedite": Field(
            Bool(),
            "ask for an expedited requeue (sbatch --requeue=expedite, Slurm 25.11+ with SlurmctldParameters="
            "enable_expedited_requeue): a requeued run is eligible at once and goes to the top of the queue; a run "
            "that fails for good clears the job's requeue flag, which Slurm would otherwise requeue and hold",
            default=False,
        ),
    },
    model="RecoverySpec",
)


def resolve_recovery(r: Any, ctx: Ctx) -> dict[str, Any]:
    """Defaults filled in; `recovery: false` becomes no restarts and no watchdog."""
    if isinstance(r, bool):
        r = {"enabled": r}
    enabled = bool(r.get("enabled", True))
    check = r.get("health_check")
    if isinstance(check, str):
        try:
            check = shlex.split(check)
        except ValueError as exc:
            ctx.fail(("recovery", "health_check"), f"cannot split the command with shell rules ({exc}); check quotes")
            check = []
        if not check:
            ctx.fail(("recovery", "health_check"), "is empty; give a command, e.g. [nvidia-smi] or remove the line")
    return {
        "enabled": enabled,
        "max_restarts": r.get("max_restarts", DEFAULT_MAX_RESTARTS) if enabled else 0,
        "hang_timeout": r.get("hang_timeout", DEFAULT_HANG_TIMEOUT) if enabled else 0,
        "spare_nodes": r.get("spare_nodes", 0),
        "health_check": tuple(check or ()),
        "expedite": bool(r.get("expedite", False)),
    }
