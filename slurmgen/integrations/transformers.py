"""Hugging Face `transformers.Trainer` under slurmgen's preemption: one callback, one argument to `train`.

    from slurmgen.integrations.transformers import SlurmgenPreemption

    preemption = SlurmgenPreemption()          # first: it takes the signals over
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[preemption])
    trainer.train(resume_from_checkpoint=preemption.resume_from_checkpoint())

Importing this module imports torch and transformers: import it only in the training program.

The Trainer runs its callbacks on every rank. At the end of every optimizer step (`on_step_end`, after gradient
accumulation) every rank calls slurmgen's `Preemption.should_stop()`; once they agree, the callback asks the
Trainer to save and stop (`control.should_save`, `control.should_training_stop`), so the Trainer writes its own
`output_dir/checkpoint-<step>` (model, optimizer, scheduler, every rank's RNG state, trainer state: what
`resume_from_checkpoint` restores). In `on_save`, called on every rank once that is written, the ranks wait
for each other, rank 0 records the checkpoint in slurmgen's resume state, requeues within the budget, and every
rank exits.

The Trainer has no SLURM handling of its own. Its optional `enable_jit_checkpoint` installs a SIGTERM handler
(transformers/trainer_jit_checkpoint.py) that saves on process-local flags, without the ranks agreeing;
slurmgen's handlers are put back when training begins, so it never acts (one line says so).
"""

from __future__ import annotations

import os
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from slurmgen.integrations import framework_checkpoint
from slurmgen.runtime.preemption import Preemption


class SlurmgenPreemption(TrainerCallback):  # type: ignore[misc]  # mypy sees transformers as Any (pyproject.toml)
    """Stop, checkpoint with the Trainer, requeue and resume, the slurmgen way.

    Construct it early in the program: it installs slurmgen's handlers at once, and a signal that came earlier
    stays pending until then (the entry point blocked it). `preemption`: a `Preemption` of your own, else one
    is made.
    """

    def __init__(self, preemption: Preemption | None = None) -> None:
        super().__init__()
        self.preemption = preemption or Preemption()
        self._handlers = framework_checkpoint.handlers_of(self.preemption)
        self._stopping = False

    def resume_from_checkpoint(self) -> str | None:
        """The checkpoint to pass as `train(resume_from_checkpoint=...)`: the one this job's previous run
        saved, else None. Call it on every rank (the same value comes back on each)."""
        found = framework_checkpoint.recorded_checkpoint(self.preemption)
        return found[0] if found else None

    # -- Trainer events ----------------------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        replaced = framework_checkpoint.take_back(self._handlers)
        if replaced and self.preemption.rank == 0:
            framework_checkpoint.log(f"took {', '.join(replaced)} back from the handler installed after slurmgen's")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._stopping or not self.preemption.should_stop():
            return
        if "save" not in self.preemption.stop_actions:
            self.preemption.save_and_exit()  # a clean exit (USR2): nothing to save
        self._stopping = True
        control.should_save = True  # the Trainer saves checkpoint-<global_step>, then calls on_save
        control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._stopping:
            return  # a periodic save of the Trainer's own
        # Where Trainer._save_checkpoint has just written it (transformers/trainer.py).
        path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        framework_checkpoint.record_and_exit(self.preemption, path, global_step=state.global_step)
