"""The `scancel` a local job finds first on PATH: `scancel --signal=SIG <job>[.<step>]`, nothing else.

A signal for a step goes to the step's fake srun (its pid is in the control directory, fake_srun.register_step),
which passes it to every task of the step, as slurmstepd does on a cluster (scancel(1): without --batch or
--full the signal reaches the steps' tasks, not the batch shell); srun returns when the tasks exit. Cancelling a
job outright is the runner's business (Ctrl-C, or `slurmgen cancel local-<n>`), not emulated here.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence

from slurmgen.local import jobenv
from slurmgen.local.fake_scontrol import running_steps
from slurmgen.signal_names import signal_name


class ScancelError(Exception):
    pass


def run(argv: Sequence[str], env: Mapping[str, str]) -> None:
    words = list(argv)
    sig: str | None = None
    targets: list[str] = []
    while words:
        word = words.pop(0)
        if word.startswith("--signal="):
            sig = word.partition("=")[2]
        elif word in ("-s", "--signal") and words:
            sig = words.pop(0)
        elif word.startswith("-"):
            raise ScancelError(f"{word} is not emulated locally (only --signal=SIG <job>[.<step>])")
        else:
            targets.append(word)
    name = signal_name(sig) if sig else None
    if name is None or len(targets) != 1:
        raise ScancelError(
            "only `scancel --signal=SIG <job>[.<step>]` is emulated locally; end a job with Ctrl-C or "
            "slurmgen cancel local-<n>"
        )
    job, _, step = targets[0].partition(".")
    control = env.get(jobenv.LOCAL_DIR, "")
    if not control or job != env.get("SLURM_JOB_ID") or (step and not step.isdigit()):
        raise ScancelError(f"Kill job error on job id {targets[0]}: Invalid job id specified")
    steps = [(n, pid) for n, pid in running_steps(control) if not step or n == int(step)]
    if step and not steps:
        raise ScancelError(f"Kill job error on job id {targets[0]}: Job/step already completing or completed")
    for _, pid in steps:
        os.kill(pid, getattr(signal, f"SIG{name}"))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        run(sys.argv[1:] if argv is None else argv, os.environ)
    except (ScancelError, OSError) as exc:
        print(f"scancel: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
