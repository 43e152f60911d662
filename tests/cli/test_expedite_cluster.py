"""recovery.expedite on a real Slurm 26.05 that allows it: a separate cluster instance (tests/cluster/up.sh
--slurm 26.05 --instance 8 with SLURMGEN_CLUSTER_EXTRA_CONF=SlurmctldParameters=enable_expedited_requeue),
started and stopped by this module's fixture, so the shared 26.05 cluster keeps Slurm's default. The 22.05 side,
which has no expedited requeue, is tests/cli/test_cli_site_cluster.py::test_expedite_where_the_cluster_has_none.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from cluster_instance import instance_with

from slurmgen.slurm.client import SlurmClient
from slurmgen.slurm.showjob import JobInfo

pytestmark = pytest.mark.slurm

SELECT = ["--slurm", "26.05", "--instance", "8"]
SETTING = "SlurmctldParameters=enable_expedited_requeue"


@pytest.fixture(scope="module")
def expedite_env() -> Iterator[dict[str, str]]:
    """The environment of a CLI that talks to a 26.05 cluster that allows expedited requeues."""
    with instance_with("26.05", "8", SETTING, timeout=600) as client_env:
        config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env=client_env)
        assert re.search(r"^SlurmctldParameters\s*=\s*enable_expedited_requeue$", config.stdout, re.M), config.stdout
        yield client_env


def settled(env: dict[str, str], job: str, timeout: float = 120) -> JobInfo:
    """The job's record once it is final or held (REQUEUE_HOLD is where an unguarded expedited job stops)."""
    client = SlurmClient(env=env, timeout=30.0)
    deadline = time.monotonic() + timeout
    while True:
        info = client.show_job(job)
        assert info is not None, job
        if info.state.is_terminal or info.state_name in ("REQUEUE_HOLD",) or time.monotonic() > deadline:
            return info
        time.sleep(1)


def test_an_expedited_job_that_fails_for_good_ends_failed_not_held(expedite_env: dict[str, str], tmp_path: Path
                                                                  ) -> None:  # fmt: skip
    """doctor says the site allows it; a job of slurmgen's with recovery.expedite whose program exits 3 ends
    FAILED, exit 3, never requeued: its batch shell clears the requeue flag. The same job written by hand, without
    that, is requeued and held (src/slurmctld/job_mgr.c `batch_requeue_fini`)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(f'name: fast\ncommand: ["{sys.executable}", "-c", "raise SystemExit(3)"]\n'
                    f'python: {sys.executable}\ntime: "00:20:00"\nrecovery: {{enabled: false, expedite: true}}\n'
                    f"output: {tmp_path}/logs\n")  # fmt: skip
    (tmp_path / "logs").mkdir()
    done = run_slurmgen("doctor", str(spec), cwd=tmp_path, env=expedite_env, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert "expedited requeue allowed (enable_expedited_requeue)" in done.stdout
    assert "recovery.expedite:" not in done.stdout  # no risk line

    done = run_slurmgen("submit", str(spec), cwd=tmp_path, env=expedite_env, timeout=60)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    info = settled(expedite_env, job)
    logs = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*.log"))
    assert (info.state_name, info.exit_code, info.restarts) == ("FAILED", 3, 0), logs[-3000:]
    assert info.fields.get("ExpeditedRequeue") == "Yes" and info.fields.get("Requeue") == "0"
    assert "expedited requeue cleared" in logs

    raw = subprocess.run(["sbatch", "--parsable", "--requeue=expedite", "-o", "/dev/null", "--wrap", "exit 3"],
                         capture_output=True, text=True, env=expedite_env, cwd=tmp_path, check=True)  # fmt: skip
    held = settled(expedite_env, raw.stdout.strip().split(";")[0])
    assert (held.state_name, held.restarts) == ("REQUEUE_HOLD", 1)
    subprocess.run(["scancel", str(held.job_id)], env=expedite_env, capture_output=True, check=False)
