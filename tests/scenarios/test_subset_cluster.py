"""The scenario engine on the real test cluster: a sampled subset of the corpus's axes, submitted with `slurmgen
submit --wait` and interrupted from outside as a site or a user would (scenarios/cluster_place.py), every invariant
on each, on 22.05 and 26.05. It adds what the emulator cannot do (a requeue by hand through Slurm) and holds the
seams the corpus found where Slurm's own srun, slurmstepd and requeue take part. A failure prints the scenario's
one-line reproduction. Two of them also run as a remote job, submitted from a laptop's repository over a real
sshd (the login node of tests/remote), on 22.05."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SlurmCluster

from scenarios import local_place
from scenarios.axes import Interruption, Scenario, why_invalid
from scenarios.cluster_place import Site, why_not_here
from scenarios.engine import judge_on_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.torch, pytest.mark.slow]

I = Interruption  # noqa: E741 - the subset reads as a table

SUBSET = [
    # a crash on the second node, restarted inside the allocation, that then completes
    Scenario("pg", "srun", 2, 1, "runtime", True, (I("crash", 1, 20),), name="crash-restart-completes"),
    # a requeue by hand (scontrol requeue through slurmgen requeue) of a program that keeps its own checkpoint
    Scenario("own", "srun", 2, 1, "requeue", True, (I("requeue", 0, 20),), name="requeue-by-hand-own-checkpoint"),
    # the failing rank exits after its casualties: it is the cause, on real srun's --kill-on-bad-exit
    Scenario("pg", "srun", 2, 2, "auto", True, (I("crash_late", 1, 20),), name="late-failing-rank-is-the-cause"),
    # a preemption while the step restarts after a crash, under torchrun
    Scenario("pg", "torchrun", 2, 1, "runtime", True, (I("preempt_restart", 0, 20),), name="preempt-during-restart"),
    # `set -e` in setup and a bug that repeats at the same step: one restart, then FAILED with its own code
    Scenario(
        "own",
        "srun",
        1,
        1,
        "requeue",
        True,
        (I("bug", 0, 5),),
        name="set-e-setup-repeated-bug",
        extra="setup: ['set -e']\nrecovery: {max_restarts: 1}\n",
    ),
    # Lightning with slurmgen's callback on two nodes, preempted beside a save: its checkpoint, a requeue, a resume
    Scenario("lightning", "srun", 2, 1, "runtime", True, (I("preempt_save", 0, 20),), name="lightning-preempted"),
]


@pytest.mark.slurm_versions("22.05", "26.05")
@pytest.mark.parametrize("scenario", SUBSET, ids=[s.name for s in SUBSET])
def test_a_scenario_on_the_cluster_keeps_every_invariant(
    slurm_cluster: SlurmCluster, tmp_path: Path, scenario: Scenario
) -> None:
    assert why_invalid(scenario, "cluster") is None and why_not_here(scenario) is None, scenario.words()
    verdict = judge_on_cluster(scenario, slurm_cluster, tmp_path)
    assert not verdict.missed, f"an interruption never fired:\n{verdict.story()}\n{verdict.observation.runner}"
    assert verdict.ok, verdict.story()


REMOTE = [SUBSET[0], SUBSET[1]]


@pytest.fixture
def laptop(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[Site]:
    """A laptop's git repository whose cluster profile reaches the test cluster's login node (a real sshd behind a
    bastion, a one-time code after the key): the scenario is submitted with `slurmgen submit --cluster alpha`."""
    from remote.cluster_login import SECRET, client_env, git, start_login

    login = start_login(slurm_cluster, otp_secret=SECRET, bastion=True)
    try:
        repo = login.root / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        work = login.root / "work"
        (repo / "clusters.yaml").write_text(f"alpha:\n  host: {login.alias}\n  workdir: {work}\n")
        env = {**client_env(login), "PYTHONPATH": local_place.environment()["PYTHONPATH"], "PYTHONWARNINGS": "ignore"}
        # `submit --cluster NAME --wait` is refused over ssh ("not there yet"): the engine follows Slurm itself
        yield Site(repo, env, ("submit", "--cluster", "alpha"), work / "runs" / "scen" / "logs", waits=False)
    finally:
        login.close_master()
        login.remove()


@pytest.mark.slurm_versions("22.05")
@pytest.mark.parametrize("scenario", REMOTE, ids=[s.name for s in REMOTE])
def test_a_scenario_of_a_remote_job_keeps_every_invariant(
    slurm_cluster: SlurmCluster, tmp_path: Path, laptop: Site, scenario: Scenario
) -> None:
    verdict = judge_on_cluster(scenario, slurm_cluster, tmp_path, laptop)
    assert not verdict.missed, f"an interruption never fired:\n{verdict.story()}\n{verdict.observation.runner}"
    assert verdict.ok, verdict.story()


CONTAINED = [SUBSET[0], SUBSET[2]]


@pytest.mark.slurm_versions("26.05")
@pytest.mark.parametrize("scenario", CONTAINED, ids=[s.name for s in CONTAINED])
def test_a_scenario_inside_an_apptainer_image_keeps_every_invariant(
    slurm_cluster: SlurmCluster, tmp_path: Path, scenario: Scenario
) -> None:
    """The program runs in the Apptainer image of tests/runtime/test_apptainer_cluster.py (its own Debian python3
    and CPU torch; slurmgen's runtime bound in by the script), on 26.05, whose chroot has Apptainer."""
    from runtime.cluster_jobs import ROOT
    from runtime.test_apptainer_cluster import IMAGE_PY, build_image

    image = build_image()
    container = (f"container: {{runtime: apptainer, image: {image}, python: {IMAGE_PY}, "
                 f"mounts: ['{ROOT}:{ROOT}:ro', '{tmp_path}:{tmp_path}']}}\n")  # fmt: skip
    site = Site(tmp_path, {**local_place.environment(), **slurm_cluster.env}, ("submit",), tmp_path / "logs",
                container=container)  # fmt: skip
    verdict = judge_on_cluster(scenario, slurm_cluster, tmp_path, site)
    assert not verdict.missed, f"an interruption never fired:\n{verdict.story()}\n{verdict.observation.runner}"
    assert verdict.ok, verdict.story()
