"""The test harness's version helpers (tests/slurm_versions.py): which worker a test runs in under CI."""

from __future__ import annotations

import pytest
from slurm_versions import worker_group

ALL = ("22.05", "24.11", "26.05")


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/jobs/test_submit_cluster.py::test_wait[slurm-24.11]", "slurm-24.11"),
        ("tests/jobs/test_submit_cluster.py::test_wait[slurm-26.05]", "slurm-26.05"),
        ("tests/runtime/test_x.py::test_mode[REQUEUE-slurm-26.05-grace]", "slurm-26.05"),
        ("tests/jobs/test_submit_cluster.py::test_wait[slurm-22.05]", "primary"),  # the primary version
        ("tests/spec/test_spec.py::test_time_forms[30-00:30:00-1800]", "primary"),  # a local test
        ("tests/spec/test_spec.py::test_cpu_defaults", "primary"),
        ("tests/spec/test_spec.py::test_text[say slurm-24.11x]", "primary"),  # not the version's parameter id
    ],
)
def test_secondary_versions_get_their_own_worker_and_the_rest_share_the_first(nodeid: str, group: str) -> None:
    assert worker_group(nodeid, ALL) == group


def test_the_first_version_listed_is_the_primary_one() -> None:
    assert worker_group("t.py::test_wait[slurm-22.05]", ("24.11", "22.05")) == "slurm-22.05"
    assert worker_group("t.py::test_wait[slurm-24.11]", ("24.11", "22.05")) == "primary"
    assert worker_group("t.py::test_wait[slurm-24.11]", ("22.05",)) == "primary"
