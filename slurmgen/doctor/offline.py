"""`slurmgen doctor SPEC` where no Slurm client answers (a laptop, a fresh clone): the checks that need only the spec
and its last job's run history, and a list of what only the cluster can tell. Pure: the CLI prints the text.

With a cluster the same checks come out of slurmgen.slurm.site.risks and doctor/site.hang_risk; this module calls
the same rules (lead_time_risk, hang_risk, the time-limit window of site_preemption: the lead time) instead of
copies of them.
"""

from __future__ import annotations

import math

from slurmgen.doctor.site import SpecFacts, hang_risk, spec_rows
from slurmgen.queries.history import LastSave
from slurmgen.slurm.site import HEADROOM, lead_time_risk

# What doctor reads from `scontrol show config` and `scontrol show partition`, in plain words.
NEEDS_CLUSTER = (
    "which partition the job runs in, and whether the spec's partition exists",
    "whether a job there can be preempted, and whether Slurm then requeues, cancels or suspends it",
    "how long a preempted job has to save before it is killed (GraceTime and KillWait)",
    "whether the preemption signal is sent at preemption too, or only SIGTERM",
    "whether Slurm requeues jobs at all (JobRequeue)",
    "for a container: whether the image exists on the nodes and has python3 and torch",
)


def spec_risks(spec: SpecFacts, last: LastSave | None) -> list[str]:
    """What can go wrong that the spec alone shows: each as `what; fix: how`."""
    found = []
    if (near := lead_time_risk(spec.lead_time, spec.time_limit)) is not None:
        found.append(f"{near.what}; fix: {near.fix}")
    if last is not None and spec.lead_time:
        need = last.seconds + (last.step_seconds or 0.0)
        if need > spec.lead_time:  # the time-limit window is the lead time (slurmgen.slurm.site.site_preemption)
            step = f" plus a step of {last.step_seconds:.1f} s" if last.step_seconds else ""
            found.append(
                f"SIGKILL mid-save at the time limit: the last save of {last.seconds:.1f} s{step} does not fit the "
                f"{spec.lead_time} s lead time; fix: raise preemption.lead_time to at least "
                f"{math.ceil(need) + HEADROOM} s, or save faster"
            )
    if (hang := hang_risk(spec, last)) is not None:
        found.append(hang)
    return found


def render_offline(spec: SpecFacts, last: LastSave | None, why: str) -> str:
    """The report without a cluster: the spec's rows, its risks, and what a cluster would add."""
    rows = [r for r in spec_rows(spec, last) if not r.lstrip().startswith("risk ")]  # risks: all of them below
    found = spec_risks(spec, last)
    checks = ["the lead time against the time limit"] if spec.lead_time else []
    if last is not None:
        checks += ["the last save against the lead time"] if spec.lead_time else []
        checks += ["recovery.hang_timeout against the last save"] if spec.hang_timeout else []
    checked = ", ".join(checks) or "nothing: preemption and the hang watchdog are off, and no save is recorded"
    lines = [
        f"No Slurm cluster answers here ({why}): what the spec alone says",
        *rows,
        f"  {'checked':<13}{checked}",
        *[f"  {'risk':<13}{r}" for r in found],
    ]
    if not found:
        lines.append(f"  {'risks':<13}none found in the spec" + ("" if last else " (no save recorded to check)"))
    lines += ["", "Needs the cluster (run slurmgen doctor where scontrol works):", *[f"  - {n}" for n in NEEDS_CLUSTER]]
    return "\n".join(lines) + "\n"
