"""Adapters that let programs built on a training framework take part in slurmgen's preemption.

Each adapter is its own module and imports its framework (and torch) when the user imports it; this package
imports nothing, and `import slurmgen.runtime` never loads any of them.

- `slurmgen.integrations.lightning`: `SlurmgenPreemption`, a Lightning callback; `fit(ckpt_path=cb.ckpt_path())`.
- `slurmgen.integrations.transformers`: `SlurmgenPreemption`, a `transformers.Trainer` callback;
  `train(resume_from_checkpoint=cb.resume_from_checkpoint())`.
- `slurmgen.integrations.accelerate`: `SlurmgenPreemption(accelerator)`, `load_state()` and
  `save_state_and_exit(...)` around `Accelerator.save_state`/`load_state`.
- `slurmgen.integrations.mlflow`: `start_run()`, one MLflow run for every run of a job (its run identity,
  SLURMGEN_RUN_ID); the Lightning module's `wandb_logger()` and `mlflow_logger()` hand that identity to Lightning's
  WandbLogger and MLFlowLogger.

All three follow one pattern: slurmgen's `Preemption` handles the signals and the stop agreement; on the agreed
stop the framework writes its own checkpoint, then slurmgen's resume state records where it is (atomically, keyed
to the job and spec), requeues once within the budget and ends the process. The next run reads that record.
"""
