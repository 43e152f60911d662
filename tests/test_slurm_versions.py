"""The test harness's version helpers (tests/slurm_versions.py): which worker a test runs in under CI."""

from __future__ import annotations

import pytest
from slurm_versions import ANY, versions_for_test, worker_group

ALL = ("22.05", "24.11", "26.05")


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/manage/test_submit_cluster.py::test_wait[slurm-24.11]", "slurm-24.11"),
        ("tests/manage/test_submit_cluster.py::test_wait[slurm-26.05]", "slurm-26.05"),
        ("tests/runtime/test_x.py::test_mode[REQUEUE-slurm-26.05-grace]", "slurm-26.05"),
        ("tests/manage/test_submit_cluster.py::test_wait[slurm-22.05]", "slurm-22.05"),  # the primary version
        ("tests/sweep/test_sweep_cluster.py::test_grid", "slurm-22.05"),  # a cluster module's own cluster
        ("tests/cluster/test_harness.py::test_up[slurm-22.05]", "slurm-22.05"),
        ("tests/slurm/test_slurm_client.py::test_show_job[slurm-22.05]", "local"),  # recorded output
        ("tests/spec/test_spec.py::test_time_forms[30-00:30:00-1800]", "local"),
        ("tests/spec/test_spec.py::test_cpu_defaults", "local"),
        ("tests/spec/test_spec.py::test_text[say slurm-24.11x]", "local"),  # not the version's parameter id
        ("tests/test_readme.py::test_the_set_up_block_works_on_a_fresh_debian_python", "side"),  # disk, network
        ("tests/test_style.py::test_clean[mypy --strict]", "side"),
        ("tests/test_readme.py::test_every_python_block_compiles", "local"),
        # local tests that fill the workers whose own cluster tests end early
        ("tests/runtime/test_preemption.py::test_save_and_exit", "slurm-24.11"),
        ("tests/security/test_secrets.py::test_masked", "side"),
        # the scenario corpus: minutes of local jobs, beside the side tests (disk, network), not after every local one
        ("tests/scenarios/test_corpus.py::test_every_invariant_holds[hang]", "side"),
        ("tests/runtime/test_preemption_cluster.py::test_mode[slurm-22.05]", "slurm-22.05"),  # a cluster test stays
        ("tests/local/test_local_run.py::test_run", "local"),
    ],
)
def test_each_versions_cluster_tests_get_their_own_worker_and_the_rest_the_local_one(nodeid: str, group: str) -> None:
    assert worker_group(nodeid, ALL) == group


def test_the_first_version_listed_is_the_primary_one() -> None:
    assert worker_group("t_cluster.py::test_wait[slurm-22.05]", ("24.11", "22.05")) == "slurm-22.05"
    assert worker_group("t_cluster.py::test_wait[slurm-24.11]", ("24.11", "22.05")) == "slurm-24.11"
    assert worker_group("t_cluster.py::test_wait[slurm-24.11]", ("22.05",)) == "slurm-22.05"
    assert worker_group("t.py::test_wait[slurm-24.11]", ("24.11", "22.05")) == "local"
    assert worker_group("tests/runtime/test_peers.py::test_loss", ("24.11", "22.05")) == "slurm-22.05"  # the second
    assert worker_group("tests/runtime/test_peers.py::test_loss", ("22.05",)) == "local"


def test_a_test_for_any_version_runs_once_on_the_last_selected_one() -> None:
    assert versions_for_test((ANY,), ALL) == ["26.05"]  # beside the primary version's worker, not in it
    assert versions_for_test((ANY,), ("22.05",)) == ["22.05"]
    assert versions_for_test(None, ALL) == ["22.05"] and versions_for_test((), ALL) == list(ALL)
    assert versions_for_test(("24.11",), ALL) == ["24.11"]
