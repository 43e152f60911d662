"""A remote job's status from `sacct` once Slurm has forgotten the job, on a real Slurm 22.05 with accounting: a
separate cluster instance (tests/cluster/up.sh --instance 6 with SLURMGEN_CLUSTER_ACCOUNTING=1: MariaDB, slurmdbd,
MinJobAge=5), started and stopped by this module's fixture, so the shared test cluster keeps running without
accounting (where the run's own records answer: tests/remote/test_remote_cluster.py). The jobs are submitted and
asked about over ssh, through a login node in the instance's first node, as a user would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster, _skip_or_fail, _tail, cluster_unavailable
from slurm_versions import DOWN, UP, ClusterInfo, Users, selected_versions
from ssh_server import Sshd

from remote.cluster_login import client_env, project, start_login
from slurmgen.slurm.client import SlurmClient, clean_submit_env

pytestmark = pytest.mark.slurm

VERSION = "22.05"  # accounting is built for the host's Slurm only (tests/cluster/README.md, "Accounting")
INSTANCE = 6
SELECT = ["--slurm", VERSION, "--instance", str(INSTANCE)]


@pytest.fixture(scope="module")
def accounting_cluster(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    """The 22.05 instance with accounting, torn down at the end whatever happened (unless another session still
    uses it)."""
    if VERSION not in selected_versions(request.config.getoption("--slurm-versions"), os.environ):
        pytest.skip(f"accounting is tested on Slurm {VERSION}, which is not among the selected versions")
    reason = cluster_unavailable(VERSION)
    if reason:
        _skip_or_fail(reason)
    info = ClusterInfo.query(VERSION, INSTANCE)
    users = Users(info.base)
    try:
        env = {**os.environ, "SLURMGEN_CLUSTER_ACCOUNTING": "1"}
        up = subprocess.run(["bash", str(UP), *SELECT], capture_output=True, text=True, timeout=600, env=env)
        if up.returncode != 0:
            _skip_or_fail(f"tests/cluster/up.sh {' '.join(SELECT)} with accounting failed:\n{_tail(up.stderr)}")
        client_env = info.client_env(clean_submit_env(os.environ))
        config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env=client_env)
        assert re.search(r"^AccountingStorageType\s*=\s*accounting_storage/slurmdbd$", config.stdout, re.M), (
            f"instance {INSTANCE} runs without accounting; another session started it differently"
        )
        yield SlurmCluster(info.base, info.conf, client_env, list(info.nodes), True, SlurmClient(env=client_env),
                           VERSION, dict(info.node_addrs), info)  # fmt: skip
    finally:
        if users.last_one_out():
            subprocess.run(["bash", str(DOWN), *SELECT], capture_output=True, timeout=120, check=False)
        users.close()


@pytest.fixture
def accounting_login(accounting_cluster: SlurmCluster) -> Iterator[Sshd]:
    server = start_login(accounting_cluster)
    yield server
    server.close_master()
    server.remove()


def test_status_comes_from_sacct_once_slurm_has_forgotten_the_job(
    accounting_login: Sshd, accounting_cluster: SlurmCluster
) -> None:
    login, cluster = accounting_login, accounting_cluster
    repo = project(login, "proj", "acct-ok", "print('done')\n", "preemption: false\n")
    (repo / "fail.py").write_text("import sys\nsys.exit(3)\n")
    (repo / "fail.yaml").write_text('name: acct-bad\ncommand: [python3, fail.py]\ntime: "5:00"\npreemption: false\n')
    env = {k: v for k, v in client_env(login).items() if not k.startswith(("SSH_ASKPASS", "DISPLAY"))}
    jobs = {}
    for spec in ("job.yaml", "fail.yaml"):
        submitted = run_slurmgen("submit", "--cluster", "alpha", spec, cwd=repo, env=env)
        assert submitted.returncode == 0, submitted.stderr
        jobs[spec] = submitted.stdout.strip()
    ok, bad = jobs["job.yaml"], jobs["fail.yaml"]
    # Both end, then Slurm forgets them: MinJobAge=5 and the controller's purge once a minute. The evidence is
    # `scontrol show job` itself, asked until it no longer knows either job.
    cluster.wait_for(ok, "COMPLETED", timeout=120)
    cluster.wait_for(bad, "FAILED", timeout=120)
    deadline = time.monotonic() + 150
    while any(cluster.client.show_job(j) is not None for j in (ok, bad)):
        assert time.monotonic() < deadline, f"Slurm still knows job {ok} or {bad} after 150 s"
        time.sleep(1)
    gone = cluster.run(["scontrol", "show", "job", ok])
    assert gone.returncode != 0 and "Invalid job id" in gone.stderr, gone.stdout + gone.stderr
    # The runs' own records go too: only accounting can answer now (without it, the state would be UNKNOWN).
    histories = list((login.root / "work").rglob("history"))
    assert histories, f"no run records under {login.root / 'work'}"
    for path in histories:
        shutil.rmtree(path)
    shown = {}
    for job in (ok, bad):
        status = run_slurmgen("status", job, cwd=repo, env=env)
        assert status.returncode == 0, status.stderr
        shown[job] = status.stdout
    assert re.search(rf"^{ok}\s+acct-ok\s+COMPLETED\s+\(sacct\)\s+0$", shown[ok], re.M), shown[ok]
    assert re.search(rf"^{bad}\s+acct-bad\s+FAILED\s+\(sacct\)\s+3$", shown[bad], re.M), shown[bad]
