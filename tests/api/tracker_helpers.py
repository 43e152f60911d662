"""What the tracker tests share: the spec of tracker_job.py and the checks that each tracker kept one run."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "tracker_job.py"
STEPS = 60
STEP_TIME = 0.2


def needs_trackers() -> None:
    """Skip without wandb or mlflow; with CI set, fail: the dev extra installs both."""
    for module in ("wandb", "mlflow"):
        if importlib.util.find_spec(module) is None:
            reason = f"needs {module}: pip install -e '.[dev]' installs it"
            if os.environ.get("CI"):
                pytest.fail(f"CI must run the tracker tests: {reason}", pytrace=False)
            pytest.skip(reason)


def spec_text(out: Path) -> str:
    """One task of tracker_job.py in ``out``; W&B offline under ``out``, MLflow's file store under ``out``."""
    return (
        "name: trk\n"
        f"command: [{sys.executable}, {PROGRAM}, '{STEPS}', '{STEP_TIME}']\n"
        "time: '00:05:00'\n"
        f"python: {sys.executable}\n"
        f"chdir: {out}\n"
        "output: logs\n"
        "preemption: {handler: requeue}\n"
        f"env: {{WANDB_MODE: offline, WANDB_SILENT: 'true', MLFLOW_TRACKING_URI: 'file:{out}/mlruns', "
        # MLflow 3 refuses its file store unless asked (it wants a database); the file store is what a test
        # without a server can use, and it is the real client and store.
        "MLFLOW_ALLOW_FILE_STORE: 'true'}\n"
    )


def check_one_run_each(out: Path, job: str) -> None:
    """Two runs of the job; each tracker saw one run id in both, W&B's the job's SLURMGEN_RUN_ID; MLflow holds
    one run with every step of the job's two runs."""
    log_dir = out / "logs" / f"trk-{job}"
    text = (log_dir / "rank-0.log").read_text()
    identity = (log_dir / "run-id").read_text().strip()
    starts = re.findall(r"run (\d) starts at step (\d+)", text)
    assert [run for run, _ in starts] == ["0", "1"] and int(starts[1][1]) > 0, text[-3000:]
    assert re.findall(r"wandb run (\S+)", text) == [identity, identity], text[-3000:]
    offline = sorted(p.name for p in (out / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(name.endswith(f"-{identity}") for name in offline), offline
    mlflow_runs = re.findall(r"mlflow run (\S+)", text)
    assert len(mlflow_runs) == 2 and len(set(mlflow_runs)) == 1, text[-3000:]
    import mlflow

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    client = mlflow.MlflowClient(f"file:{out}/mlruns")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == mlflow_runs[:1]
    assert runs[0].data.tags["slurmgen.run_id"] == identity
    steps = sorted({m.step for m in client.get_metric_history(mlflow_runs[0], "loss")})
    assert steps == list(range(STEPS)), steps
    assert "done" in text
