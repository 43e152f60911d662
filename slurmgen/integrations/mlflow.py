"""MLflow under slurmgen: one MLflow run for every run of a job (its requeues, restarts and `slurmgen resume`).

    from slurmgen.integrations.mlflow import start_run

    with start_run(experiment_name="my-exp"):   # rank 0; None on the other ranks
        mlflow.log_metric("loss", loss, step=step)

MLflow's tracking server chooses the run id, so slurmgen cannot hand it over as it hands WANDB_RUN_ID to W&B
(Lightning #6205: every requeued Lightning job starts a new MLflow run). The job's first run starts the MLflow run
and keeps its id in a small file named after the job's run identity (SLURMGEN_RUN_ID, the same in every run of
the job); every later run finds it there and resumes that run. The file lives in the job's state directory
(SLURMGEN_STATE_DIR, shared by `slurmgen resume`'s new job) when preemption is on, else in its log directory.

Only rank 0 talks to MLflow: other ranks get None, so N ranks never start N runs. Outside a slurmgen job this is
plain `mlflow.start_run(**kwargs)`. Importing this module imports mlflow.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import mlflow
from mlflow.exceptions import MlflowException

from slurmgen.atomic import write_text
from slurmgen.job_context.context import JobContext

TAG = "slurmgen.run_id"  # the run identity, as a tag of the MLflow run


def record_path(environ: JobContext | Mapping[str, str] | None = None) -> str | None:
    """Where the MLflow run id of this job is kept; None outside a slurmgen job (no SLURMGEN_RUN_ID)."""
    job = _job(environ)
    run_id = job.run_id
    if not run_id:
        return None
    state, logs = job.state_dir or "", job.log_dir or ""
    directory = state if state and os.path.isdir(state) else logs
    return os.path.join(directory, f"{run_id}.mlflow-run") if directory else None


def recorded_run(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return str(json.load(handle)["run_id"]) or None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _job(environ: JobContext | Mapping[str, str] | None) -> JobContext:
    """The job context of these functions, each of which the user's program calls as its own entry point."""
    return JobContext.of(os.environ if environ is None else environ)


def start_run(environ: JobContext | Mapping[str, str] | None = None, **kwargs: Any) -> mlflow.ActiveRun | None:
    """Start this job's MLflow run on its first run; resume the same run in every later run. On rank 0 only
    (None elsewhere). ``kwargs`` go to `mlflow.start_run` (experiment_id, run_name, tags...); set the tracking URI
    and experiment as usual (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME, mlflow.set_experiment)."""
    job = _job(environ)
    if job.rank != 0:
        return None
    path = record_path(job)
    if path is None:
        return mlflow.start_run(**kwargs)
    known = recorded_run(path)
    if known is not None:
        try:
            active = mlflow.start_run(run_id=known, **{k: v for k, v in kwargs.items() if k != "run_name"})
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise  # a server that does not answer: never start a second run for the same job
            print(f"slurmgen: the MLflow run {known} named in {path} is gone; starting a new one", file=sys.stderr)
        else:
            print(f"slurmgen: resuming the MLflow run {known} of this job", file=sys.stderr, flush=True)
            return active
    tags = {**dict(kwargs.pop("tags", None) or {}), TAG: str(job.run_id)}
    active = mlflow.start_run(tags=tags, **kwargs)
    record = {"run_id": active.info.run_id, "experiment_id": active.info.experiment_id,
              "tracking_uri": mlflow.get_tracking_uri()}  # fmt: skip
    write_text(path, json.dumps(record) + "\n")
    return active


def job_run_id(
    experiment_name: str | None = None,
    tracking_uri: str | None = None,
    environ: JobContext | Mapping[str, str] | None = None,
) -> str | None:
    """The id of this job's MLflow run, created (not started) by the job's first run in ``experiment_name`` (else
    MLflow's current experiment): what MLFlowLogger(run_id=...) resumes. On rank 0 only; None elsewhere and
    outside a slurmgen job. Uses the current tracking URI (MLFLOW_TRACKING_URI, mlflow.set_tracking_uri)."""
    job = _job(environ)
    path = record_path(job)
    if path is None or job.rank != 0:
        return None
    known = recorded_run(path)
    if known is not None:
        return known
    client = mlflow.MlflowClient(tracking_uri)
    if experiment_name is not None:
        found = client.get_experiment_by_name(experiment_name)
        experiment = found.experiment_id if found is not None else client.create_experiment(experiment_name)
    else:
        from mlflow.tracking.fluent import _get_experiment_id

        experiment = _get_experiment_id() or "0"  # MLflow's Default experiment
    run = client.create_run(experiment, tags={TAG: str(job.run_id)})
    record = {"run_id": run.info.run_id, "experiment_id": experiment, "tracking_uri": client.tracking_uri}
    write_text(path, json.dumps(record) + "\n")
    return str(run.info.run_id)
