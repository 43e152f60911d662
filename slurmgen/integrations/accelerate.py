"""Hugging Face accelerate under slurmgen's preemption: `Accelerator.save_state`/`load_state` at the agreed stop.

    from slurmgen.integrations.accelerate import SlurmgenPreemption

    accelerator = Accelerator()
    preemption = SlurmgenPreemption(accelerator)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)
    state = preemption.load_state()             # restores what save_state saved; None on the first run
    start = state["step"] if state else 0
    for step, batch in enumerate(accelerator.skip_first_batches(data, start), start):
        ...
        if preemption.should_stop():            # every rank, every step
            preemption.save_state_and_exit(step=step + 1)

Importing this module imports torch and accelerate: import it only in the training program.

accelerate installs no signal handlers and has no SLURM requeue of its own; the loop is the user's, so the stop
check is too. On the agreed stop every rank calls `Accelerator.save_state` (models, optimizers, schedulers,
samplers, every rank's RNG state, objects registered with `register_for_checkpointing`) into a new directory;
once every rank is done, rank 0 records it in slurmgen's resume state with the keyword arguments given (plain
values: the step, the epoch), requeues within the budget, and every rank exits.

On CPU, `Accelerator()` joins the job's process group only when told to use the CPU: slurmgen's entry point
sets `ACCELERATE_USE_CPU=true` in jobs without GPUs (task/prepare.py says why). Do not combine with
`ProjectConfiguration(automatic_checkpoint_naming=True)`: `save_state` then ignores the directory it is given.
"""

from __future__ import annotations

import os
from typing import Any

import accelerate

from slurmgen.integrations import framework_checkpoint
from slurmgen.runtime.preemption import Preemption

PATTERN = "run*"


class SlurmgenPreemption:
    """Stop, `save_state`, requeue, and `load_state` on the next run, the slurmgen way.

    `directory`: where the states go (default: `<state_dir>/<job>.accelerate`); `preemption`: a `Preemption` of
    your own, else one is made (its handlers are installed at once; a signal that came earlier stays pending
    until then, as the entry point blocked it).
    """

    def __init__(
        self,
        accelerator: accelerate.Accelerator,
        directory: str | None = None,
        preemption: Preemption | None = None,
    ) -> None:
        self.accelerator = accelerator
        self.preemption = preemption or Preemption()
        self.directory = os.path.abspath(
            directory or framework_checkpoint.default_directory(self.preemption, "accelerate")
        )

    def load_state(self) -> dict[str, Any] | None:
        """If this job's previous run saved a state: `accelerator.load_state` it on every rank and return the
        keyword arguments given to `save_state_and_exit`; else None. Call it on every rank, after `prepare`."""
        found = framework_checkpoint.recorded_checkpoint(self.preemption)
        framework_checkpoint.prune(self.preemption, self.directory, PATTERN, keep=found[0] if found else None)
        if found is None:
            return None
        path, record = found
        self.accelerator.load_state(path)
        return {key: value for key, value in record.items() if key != framework_checkpoint.CHECKPOINT}

    def should_stop(self) -> bool:
        """True on every rank once any rank got a stop signal (Preemption.should_stop). Call it on every rank."""
        return self.preemption.should_stop()

    def save_state_and_exit(self, **extra: Any) -> None:
        """`accelerator.save_state` on every rank, record it with `extra`, requeue if asked, and exit.

        Call it on every rank once `should_stop()` said True; called without a stop, it saves and exits."""
        if not self.preemption.stop_actions:
            self.preemption.request("save", "exit")
            self.preemption.should_stop()
        if "save" not in self.preemption.stop_actions:
            self.preemption.save_and_exit()  # a clean exit (USR2): nothing to save
        path = os.path.join(self.directory, f"run{self.preemption.context.run}")
        self.accelerator.save_state(path)
        framework_checkpoint.record_and_exit(self.preemption, path, **extra)
