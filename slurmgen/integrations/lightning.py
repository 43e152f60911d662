"""PyTorch Lightning under slurmgen's preemption: one callback, one argument to `fit`.

    from slurmgen.integrations.lightning import SlurmgenPreemption

    preemption = SlurmgenPreemption()          # first: it takes the signals over
    trainer = L.Trainer(..., callbacks=[preemption])
    trainer.fit(model, data, ckpt_path=preemption.ckpt_path())

Importing this module imports torch and Lightning (`lightning`, else `pytorch_lightning`): import it only in the
training program.

Lightning's own SLURM handling is switched off for the fit: `SLURMEnvironment.auto_requeue` is set to False and
slurmgen's handlers are put back after Lightning registers its own (`_SignalConnector.register_signal_handlers`,
lightning/pytorch/trainer/connectors/signal_connector.py, runs just before the training loop). Lightning's
handler would otherwise checkpoint inside the signal handler and requeue by itself on global rank 0 (no budget,
and by the whole array's id in releases before Lightning #15040), and its SIGTERM handler broadcasts from inside
the handler and ends the fit without a checkpoint (SIGTERMException).

Instead, at the end of every training batch that stepped the optimizer, every rank calls slurmgen's
`Preemption.should_stop()`; once they agree, every rank calls `trainer.save_checkpoint` (Lightning's full
checkpoint: weights, optimizers, schedulers, loop progress, callbacks), rank 0 records its path in slurmgen's
resume state, requeues within the budget, and every rank exits. The next run passes `ckpt_path()` to `fit`.
"""

from __future__ import annotations

import os
from typing import Any

try:  # the unified package first (it installs the standalone one too), then the standalone one alone
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - depends on which package the user installed
    import pytorch_lightning as pl

from slurmgen.integrations import framework_checkpoint
from slurmgen.job_context.context import JobContext
from slurmgen.runtime.preemption import Preemption

PATTERN = "run*-step=*.ckpt"


class SlurmgenPreemption(pl.Callback):  # type: ignore[misc]  # mypy sees Lightning as Any (pyproject.toml)
    """Stop, checkpoint with Lightning, requeue and resume, the slurmgen way.

    Construct it before the Trainer, early in the program: it installs slurmgen's handlers at once, and a signal
    that came earlier stays pending until then (the entry point blocked it). `dirpath`: where the checkpoints
    go (default: `<state_dir>/<job>.lightning`); `preemption`: a `Preemption` of your own, else one is made.
    """

    def __init__(self, dirpath: str | None = None, preemption: Preemption | None = None) -> None:
        super().__init__()
        self.preemption = preemption or Preemption()
        self.dirpath = os.path.abspath(dirpath or framework_checkpoint.default_directory(self.preemption, "lightning"))
        self._handlers = framework_checkpoint.handlers_of(self.preemption)

    def ckpt_path(self) -> str | None:
        """The checkpoint to pass as `fit(ckpt_path=...)`: the one this job's previous run saved, else None.

        Call it on every rank (the same value comes back on each)."""
        found = framework_checkpoint.recorded_checkpoint(self.preemption)
        path = found[0] if found else None
        framework_checkpoint.prune(self.preemption, self.dirpath, PATTERN, keep=path)
        return path

    # -- Lightning hooks ---------------------------------------------------------------------------------------

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        # SLURMEnvironment (lightning/fabric/plugins/environments/slurm.py) is the one with auto_requeue; found by
        # the attribute, so that lightning.fabric's and lightning_fabric's copies of the class are both seen.
        environment: Any = getattr(trainer.strategy, "cluster_environment", None)
        if getattr(environment, "auto_requeue", False):
            environment.auto_requeue = False  # no SIGUSR1 handler and no "Bypassing SIGTERM" from Lightning

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        # Lightning has just registered its handlers (Trainer._run: register_signal_handlers, then the loop);
        # its SIGTERM handler is registered whatever auto_requeue says. Put slurmgen's back.
        framework_checkpoint.take_back(self._handlers)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        stepped = (batch_idx + 1) % trainer.accumulate_grad_batches == 0 or trainer.is_last_batch
        if not stepped or not self.preemption.should_stop(step=trainer.global_step):
            return  # mid-accumulation a checkpoint would lose the accumulated gradients
        if "save" not in self.preemption.stop_actions:
            self.preemption.save_and_exit()  # a clean exit (USR2): nothing to save
        # What Lightning's own requeue handler does first (signal_connector.py, _slurm_sigusr_handler_fn).
        for logger in trainer.loggers:
            logger.finalize("finished")
        run = self.preemption.context.run
        path = os.path.join(self.dirpath, f"run{run}-step={trainer.global_step}.ckpt")
        trainer.save_checkpoint(path)  # every rank: the strategy decides who writes, then a barrier
        framework_checkpoint.record_and_exit(self.preemption, path, global_step=trainer.global_step)


# -- experiment trackers: one run for every run of the job -------------------------------------------------------


def wandb_logger(**kwargs: Any) -> Any:
    """Lightning's WandbLogger on this job's one W&B run: `id` is the job's run identity (SLURMGEN_RUN_ID, the
    same after every requeue and `slurmgen resume`) and `resume="allow"`, unless given. Outside a slurmgen job,
    WandbLogger(**kwargs) as it is (Lightning #13524: a requeued job otherwise starts a new run)."""
    identity = JobContext.from_environ(os.environ).run_id  # the logger's own read of the job (the program's entry)
    if identity:
        kwargs.setdefault("id", identity)
        kwargs.setdefault("resume", "allow")
    return pl.loggers.WandbLogger(**kwargs)


def mlflow_logger(experiment_name: str = "lightning_logs", tracking_uri: str | None = None, **kwargs: Any) -> Any:
    """Lightning's MLFlowLogger on this job's one MLflow run: the job's first run creates it (rank 0) and keeps its
    id beside the job's state (slurmgen.integrations.mlflow); every later run logs to the same run (Lightning
    #6205). ``tracking_uri`` defaults as MLFlowLogger's does: MLFLOW_TRACKING_URI, else file:./mlruns."""
    from slurmgen.integrations.mlflow import job_run_id

    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "file:" + os.path.abspath("mlruns")
    if "run_id" not in kwargs:
        kwargs["run_id"] = job_run_id(experiment_name, uri)
    return pl.loggers.MLFlowLogger(experiment_name=experiment_name, tracking_uri=uri, **kwargs)
