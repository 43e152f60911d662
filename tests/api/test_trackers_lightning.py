"""The Lightning adapter hands the job's run identity to Lightning's own loggers: WandbLogger gets it as its run
id, MLFlowLogger gets the job's one MLflow run, created by the first run and found again by every later one."""

from __future__ import annotations

from pathlib import Path

import pytest

from .tracker_helpers import needs_trackers

pytestmark = [pytest.mark.torch, pytest.mark.slow]


def test_lightning_loggers_get_the_jobs_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs_trackers()
    lightning = pytest.importorskip("slurmgen.integrations.lightning")
    for name, value in {"SLURMGEN_RUN_ID": "77-0a1b2c3d", "SLURMGEN_LOG_DIR": str(tmp_path), "RANK": "0",
                        "SLURMGEN_STATE_DIR": str(tmp_path / "none"), "MLFLOW_ALLOW_FILE_STORE": "true",
                        "WANDB_MODE": "offline"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    wandb = lightning.wandb_logger(save_dir=str(tmp_path))
    assert wandb.version == "77-0a1b2c3d"
    uri = f"file:{tmp_path}/mlruns"
    first = lightning.mlflow_logger("exp", uri)
    again = lightning.mlflow_logger("exp", uri)  # the next run of the job
    assert first.run_id == again.run_id and (tmp_path / "77-0a1b2c3d.mlflow-run").is_file()
    run = first.experiment.get_run(first.run_id)
    assert run.data.tags["slurmgen.run_id"] == "77-0a1b2c3d"
    monkeypatch.setenv("SLURMGEN_RUN_ID", "78-00000000")  # another job: another run
    assert lightning.mlflow_logger("exp", uri).run_id != first.run_id
