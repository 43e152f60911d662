"""The spec's recovery: section: its defaults, `recovery: false`, the health check, and what the script exports."""

from __future__ import annotations

import shlex

import pytest

from slurmgen import contract
from slurmgen.errors import SpecError
from slurmgen.job_context.context import JobContext
from slurmgen.script.render import context
from slurmgen.spec.load import load_text
from slurmgen.spec.recovery import DEFAULT_HANG_TIMEOUT, DEFAULT_MAX_RESTARTS

BASE = 'name: x\ncommand: [python, t.py]\ntime: "10"\n'


def exports(text: str) -> dict[str, str]:
    return dict(context(load_text(text, "job.yaml").spec)["exports"])


def test_recovery_is_on_by_default_with_a_generous_hang_timeout() -> None:
    spec = load_text(BASE, "job.yaml").spec
    assert spec.recovery.max_restarts == DEFAULT_MAX_RESTARTS > 0
    assert spec.recovery.hang_timeout == DEFAULT_HANG_TIMEOUT >= 600
    assert (spec.recovery.spare_nodes, spec.recovery.health_check) == (0, ())
    got = exports(BASE)
    assert got[contract.MAX_RESTARTS] == str(DEFAULT_MAX_RESTARTS)
    assert got[contract.HANG_TIMEOUT] == str(DEFAULT_HANG_TIMEOUT)
    assert contract.SPARE_NODES not in got and contract.HEALTH_CHECK not in got


def test_recovery_false_switches_restarts_and_the_watchdog_off() -> None:
    got = exports(BASE + "recovery: false\n")
    assert (got[contract.MAX_RESTARTS], got[contract.HANG_TIMEOUT]) == ("0", "0")


def test_health_check_as_a_string_is_split_like_command_and_exported_quoted() -> None:
    loaded = load_text(BASE + "recovery: {health_check: \"check-node --min-free '10 G'\", spare_nodes: 1}\n", "j.yaml")
    assert loaded.spec.recovery.health_check == ("check-node", "--min-free", "10 G")
    got = dict(context(loaded.spec)["exports"])
    assert shlex.split(got[contract.HEALTH_CHECK]) == ["check-node", "--min-free", "10 G"]
    assert got[contract.SPARE_NODES] == "1"
    # Acted on (batch/nodes.py): no longer the warning that said they were not.
    assert not {w.path for w in loaded.warnings} & {"recovery.health_check", "recovery.spare_nodes"}


def test_a_bad_recovery_value_names_the_file_and_field() -> None:
    with pytest.raises(SpecError) as caught:
        load_text(BASE + "recovery: {hang_timeout: soon}\n", "job.yaml")
    assert "recovery.hang_timeout" in str(caught.value) and "job.yaml:4" in str(caught.value)


def test_each_restart_takes_the_next_rendezvous_port_of_the_range() -> None:
    from slurmgen.task.rendezvous import master_port

    env = {contract.PORT: "20000", contract.PORT_RANGE: "10", "SLURM_JOB_ID": "19"}
    first = master_port(JobContext.from_environ(env), contract.DEFAULT_EPHEMERAL).port
    again = master_port(JobContext.from_environ({**env, contract.STEP_ATTEMPT: "1"}), contract.DEFAULT_EPHEMERAL).port
    assert (first, again) == (20009, 20000)  # wraps inside the configured range
