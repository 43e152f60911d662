"""A cluster instance of its own for the tests that need a setting the shared test cluster must not have
(tests/cluster/up.sh --instance K with SLURMGEN_CLUSTER_EXTRA_CONF): started on first use, stopped by the last
session that uses it, and the environment of a Slurm client that talks to it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import _skip_or_fail, _tail, cluster_unavailable
from slurm_versions import DOWN, UP, Users

from slurmgen.slurm.client import clean_submit_env


@contextmanager
def instance_with(version: str, instance: str, extra_conf: str, timeout: float = 300) -> Iterator[dict[str, str]]:
    """The client environment of instance ``instance`` of Slurm ``version`` started with ``extra_conf`` lines:
    its SLURM_CONF, and for a chroot's version its client commands first on PATH (an older scontrol cannot read
    a newer controller's answers). Skipped, or failed under CI, where the cluster cannot run."""
    reason = cluster_unavailable(version)
    if reason:
        _skip_or_fail(reason)
    select = ["--slurm", version, "--instance", instance]
    info = subprocess.run(["bash", str(UP), *select, "--info"], capture_output=True, text=True, check=True)
    fields = dict(line.split("=", 1) for line in info.stdout.splitlines() if "=" in line)
    users = Users(Path(fields["BASE"]))
    try:
        env = {**os.environ, "SLURMGEN_CLUSTER_EXTRA_CONF": extra_conf}
        up = subprocess.run(["bash", str(UP), *select], capture_output=True, text=True, timeout=timeout, env=env)
        if up.returncode != 0:
            _skip_or_fail(f"tests/cluster/up.sh {' '.join(select)} failed:\n{_tail(up.stderr)}")
        client_env = clean_submit_env(os.environ) | {"SLURM_CONF": fields["SLURM_CONF"]}
        if fields.get("PATH_PREPEND"):
            client_env["PATH"] = f"{fields['PATH_PREPEND']}{os.pathsep}{os.environ.get('PATH', '')}"
        yield client_env
    finally:
        if users.last_one_out():
            subprocess.run(["bash", str(DOWN), *select], capture_output=True, timeout=120, check=False)
        users.close()
