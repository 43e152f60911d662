"""A multi-cluster site end to end, in-process: the stand-in clusters of tests/fake_slurm.py (FakeClusters) answer
`sbatch --parsable` with `<id>;<cluster>` and know a job only when asked with `-M <cluster>`, as a site whose
clusters share one slurmdbd does; the local test cluster has no slurmdbd and refuses every `-M`
(tests/cli/test_cli_multi_cluster_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_slurm import FakeClusters
from tiny_job import SPEC

from .cli_setup import TINY, run


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClusters:
    """Clusters alpha and beta (and the login node's own, home) alone on PATH; tiny.yaml asks for `-M alpha,beta`,
    and a team's clusters.yaml beside it has a profile whose defaults name alpha."""
    site = FakeClusters(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(site.bin_dir))
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    monkeypatch.delenv("SLURM_CLUSTERS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "tiny.yaml").write_text(TINY + "sbatch: {clusters: 'alpha,beta'}\n")
    (work / "plain.yaml").write_text(SPEC.format(output="logs").replace("output: logs\n", ""))  # the profile's
    # Slurm's file name patterns have no cluster (sbatch(1) "filename pattern"): two jobs 42 of one name would share
    # logs/tiny-42.log, so the profile gives alpha's jobs a directory of their own (docs/remote.md, "Multi-cluster
    # sites")
    (work / "clusters.yaml").write_text(
        "on-alpha:\n  workdir: /unused\n  defaults:\n    output: logs/alpha\n    sbatch: {M: alpha}\n"
    )
    return site


def _rows(out: str) -> dict[str, list[str]]:
    """status's table by its JOB column."""
    return {line.split()[0]: line.split() for line in out.splitlines()[1:]}


def test_a_job_of_each_cluster_is_asked_of_its_own_cluster(site: FakeClusters, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:  # fmt: skip
    # sbatch picks beta of `-M alpha,beta` (the stand-in takes the last): the answer names it, and it is kept
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (0, "beta:42\n") and "submitted job beta:42 on cluster beta" in err
    # the profile's default `M: alpha` (clusters.yaml) sends the same spec to alpha, whose ids are its own: 42 again
    code, out, err = run(capsys, "submit", "plain.yaml", "--cluster", "on-alpha")
    assert (code, out) == (0, "alpha:42\n"), err
    (journal,) = Path.cwd().glob(".slurmgen/journal.jsonl")
    kept = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["job_id"], e["cluster"]) for e in kept if e["event"] == "submitted"] == [("42", "beta"), ("42", "alpha")]

    code, out, _ = run(capsys, "status", "beta:42")
    assert code == 0 and _rows(out)["beta:42"][1:3] == ["tiny", "RUNNING"]
    code, out, _ = run(capsys, "status", "42;alpha")  # Slurm's own spelling, as sbatch --parsable printed it
    assert code == 0 and list(_rows(out)) == ["alpha:42"]
    code, out, _ = run(capsys, "status")  # the journal's jobs: each asked of its cluster
    assert code == 0 and list(_rows(out)) == ["beta:42", "alpha:42"]

    code, out, _ = run(capsys, "logs", "beta:42")
    assert code == 0 and "hello from cluster beta, job 42" in out and "alpha" not in out

    code, _, err = run(capsys, "requeue", "beta:42")
    assert code == 0 and "slurmgen status beta:42" in err
    code, _, err = run(capsys, "cancel", "alpha:42")
    assert code == 0, err
    assert (site.jobs("beta")["42"]["state"], site.jobs("beta")["42"]["restarts"]) == ("PENDING", 1)
    assert site.jobs("alpha")["42"]["state"] == "CANCELLED" and site.jobs("alpha")["42"]["restarts"] == 0
    code, out, _ = run(capsys, "status")
    assert code == 0 and _rows(out)["beta:42"][2] == "PENDING" and _rows(out)["alpha:42"][2] == "CANCELLED"

    # the stand-in runs no batch shell, so no run was recorded: said of beta's job, where beta's job keeps it
    code, out, err = run(capsys, "history", "beta:42")
    assert code == 2 and err.startswith("error: job beta:42: no run history") and "logs/tiny-42/history" in err

    # resume of the cancelled job: Slurm still knows it on alpha, so it is requeued there
    code, _, err = run(capsys, "resume", "alpha:42")
    assert code == 0 and "slurmgen status alpha:42" in err
    assert (site.jobs("alpha")["42"]["state"], site.jobs("alpha")["42"]["restarts"]) == ("PENDING", 1)
    assert site.jobs("beta")["42"]["restarts"] == 1  # its one requeue above, no more

    # every command after the two submissions named the job's cluster; none asked the login node's own
    later = [argv for argv in site.calls if argv[0] != "sbatch"]
    assert later and all(argv[1] in ("--clusters=alpha", "--clusters=beta") for argv in later), later


def test_a_cluster_slurm_cannot_reach_is_one_line(site: FakeClusters, capsys: pytest.CaptureFixture[str]) -> None:
    Path("tiny.yaml").write_text(TINY + "sbatch: {clusters: gamma}\n")
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert code == 3 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: tiny.yaml: sbatch.clusters: sbatch: Slurm cannot reach cluster 'gamma' named by "
                          "--clusters") and "sacctmgr list clusters" in err  # fmt: skip


def test_a_job_named_on_the_wrong_cluster_is_unknown_there(site: FakeClusters, capsys: pytest.CaptureFixture[str]
                                                          ) -> None:  # fmt: skip
    assert run(capsys, "submit", "tiny.yaml")[1] == "beta:42\n"
    code, _, err = run(capsys, "status", "alpha:42")  # alpha has no job 42 yet: not beta's, never a guess
    assert code != 0 and "42" in err and len(err.splitlines()) == 1, err
    code, _, err = run(capsys, "cancel", "alpha:42")
    assert code != 0 and site.jobs("beta")["42"]["state"] == "RUNNING", err


def test_the_python_api_names_the_cluster_too(site: FakeClusters, capsys: pytest.CaptureFixture[str]) -> None:
    import slurmgen

    job = slurmgen.submit("tiny.yaml")
    assert job == slurmgen.Job("42;beta") and job.id == "beta:42"
    assert job.state() == "RUNNING" and slurmgen.Job("alpha:42").handle.label == "alpha:42"
    assert site.calls[-1][:2] == ["scontrol", "--clusters=beta"]
    assert run(capsys, "submit", "plain.yaml", "--cluster", "on-alpha")[1] == "alpha:42\n"
    # one squeue per cluster, each job under the id it was asked by (with its cluster)
    states = slurmgen.status(["beta:42", "alpha:42", "42;alpha", "alpha:43"])
    assert states == {"beta:42": "RUNNING", "alpha:42": "RUNNING", "alpha:43": "UNKNOWN"}
    assert [argv[:2] for argv in site.calls[-2:]] == [["squeue", "--clusters=beta"], ["squeue", "--clusters=alpha"]]
