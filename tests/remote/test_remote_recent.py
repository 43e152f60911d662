"""`slurmgen status` without an argument: a job submitted over ssh is asked of its cluster (one round trip for
all of that cluster's jobs), never of this machine's Slurm, which does not know it; when the cluster cannot be
asked (an expired second factor), its one line is raised, and no row says that Slurm forgot the job."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from slurmgen.backends.registry import recent
from slurmgen.journal import Entry, Journal
from slurmgen.remote import transport
from slurmgen.remote.transport import RemoteResult, TransportError
from slurmgen.slurm.client import SlurmClient

from .test_remote_status import answer, show_row, squeue_row

REFUSED = "cluster alpha: login refused: ssh says 'root@login: Permission denied (keyboard-interactive).'"


class FakeCluster:
    def __init__(self, text: str | None) -> None:
        self.text = text  # None: the login is refused
        self.calls = 0

    def run(self, script: str, stdin: bytes = b"", timeout: float = 120) -> RemoteResult:
        self.calls += 1
        if self.text is None:
            raise TransportError(REFUSED)
        return RemoteResult(0, self.text.encode(), "")


def journal_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 7 submitted to cluster alpha over ssh, job 8 to this machine's Slurm."""
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    (tmp_path / "clusters.yaml").write_text(f"alpha:\n  host: cluster-a\n  workdir: {tmp_path / 'work'}\n")
    journal = Journal(tmp_path / "home")
    spec = str(tmp_path / "job.yaml")
    journal.append(Entry("submitted", "t7", "remote", spec, "/w/r7", "job.sbatch", 1.0, job_id="7",
                         log_dir="/w/logs", extra={"profile": "alpha"}))  # fmt: skip
    journal.append(Entry("submitted", "t8", "here", spec, "/w/r8", "job.sbatch", 2.0, job_id="8", log_dir="/w/l8"))


def local_slurm(asked: list[str]) -> SlurmClient:
    def run(argv: Sequence[str], env: Mapping[str, str] | None, timeout: float) -> subprocess.CompletedProcess[str]:
        asked.append(argv[-1])
        return subprocess.CompletedProcess(list(argv), 0, show_row(argv[-1], "RUNNING"), "")

    return SlurmClient(run=run)


def test_a_remote_job_in_the_list_is_asked_of_its_cluster_not_of_this_machines_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal_of(tmp_path, monkeypatch)
    cluster = FakeCluster(answer(squeue=squeue_row("7", "COMPLETED"), sacct="7|COMPLETED|0:0"))
    monkeypatch.setattr(transport, "transport_for", lambda *args: cluster)
    asked: list[str] = []
    table = recent(local_slurm(asked)).out[0].splitlines()
    assert asked == ["8"] and cluster.calls == 1
    assert table[1].split()[:4] == ["7", "remote", "COMPLETED", "(sacct)"]  # the journal's order
    assert table[2].split()[:3] == ["8", "t", "RUNNING"]  # scontrol's JobName


def test_a_cluster_that_cannot_be_asked_is_its_one_line_never_a_forgotten_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal_of(tmp_path, monkeypatch)
    monkeypatch.setattr(transport, "transport_for", lambda *args: FakeCluster(None))
    with pytest.raises(TransportError) as raised:
        recent(local_slurm([]))
    assert str(raised.value) == REFUSED


class ScriptedCluster(FakeCluster):
    """The login of a multi-cluster site: answers each status script for the one cluster it names, if it names one
    (`--clusters=east`), else for the login node's own cluster; keeps the scripts."""

    def __init__(self, answers: Mapping[str | None, str]) -> None:
        super().__init__("")
        self.answers = answers
        self.scripts: list[str] = []

    def run(self, script: str, stdin: bytes = b"", timeout: float = 120) -> RemoteResult:
        self.scripts.append(script)
        named = next((c for c in self.answers if c is not None and f"--clusters={c} " in script), None)
        return RemoteResult(0, self.answers[named].encode(), "")


def test_jobs_of_two_clusters_behind_one_login_are_each_asked_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job 7 of the login's own cluster and job 7 of cluster east (sbatch answered `7;east` over ssh): two jobs,
    one round trip each, every Slurm command of the second naming east."""
    journal_of(tmp_path, monkeypatch)
    journal = Journal(tmp_path / "home")
    journal.append(Entry("submitted", "t9", "east", str(tmp_path / "job.yaml"), "/w/r9", "job.sbatch", 3.0,
                         job_id="7", cluster="alpha", log_dir="/w/logs",
                         extra={"profile": "alpha", "slurm_cluster": "east"}))  # fmt: skip
    login = ScriptedCluster({
        None: answer(squeue=squeue_row("7", "COMPLETED"), sacct="7|COMPLETED|0:0"),
        "east": answer(squeue=squeue_row("7", "RUNNING")),
    })  # fmt: skip
    monkeypatch.setattr(transport, "transport_for", lambda *args: login)
    rows = [line.split()[:3] for line in recent(local_slurm([])).out[0].splitlines()[1:]]
    assert rows == [["7", "remote", "COMPLETED"], ["8", "t", "RUNNING"], ["east:7", "east", "RUNNING"]]
    assert len(login.scripts) == 2 and "--clusters" not in login.scripts[0]
    commands = ("squeue ", "sacct ", "scontrol ")
    asked = [ln for ln in login.scripts[1].splitlines()
             if not ln.startswith(("echo", "command -v")) and any(c in ln for c in commands)]  # fmt: skip
    assert len(asked) == 3 and all("--clusters=east " in line for line in asked), asked
