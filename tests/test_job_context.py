"""The job context (read once from the environment), the one job-key rule, and the run-history object."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from history_events import write_three_runs

from slurmgen import contract, run_history
from slurmgen.errors import RuntimeSetupError
from slurmgen.job_context.context import JobContext
from slurmgen.job_context.values import KEY_SHELL, key_from
from slurmgen.local.fake_scontrol import ScontrolError, fake_requeue
from slurmgen.slurm.ids import parse_job_id

FULL = {
    "SLURM_JOB_ID": "91",
    "SLURM_ARRAY_JOB_ID": "90",
    "SLURM_ARRAY_TASK_ID": "1",
    "SLURM_RESTART_COUNT": "2",
    contract.LOG_DIR: "/logs/t-90_1",
    contract.STATE_DIR: "/state",
    contract.PREEMPT_SIGNAL: "USR1",
    contract.PREEMPT_HANDLER: "requeue",
    contract.MAX_REQUEUES: "3",
    contract.MAX_PREEMPTIONS: "",
    contract.REQUEUE_ON_FAILURE: "1",
    contract.CONTAINER: "1",
    contract.START_TIME: "1000",
    contract.TIME_LIMIT: "3600",
    contract.LEAD_TIME: "120",
    contract.SPEC_HASH: "abc",
    contract.SIGNALS: "USR1@1010",
}


def test_a_context_reads_every_field_once_from_the_environment() -> None:
    ctx = JobContext.from_environ(FULL)
    assert (ctx.key, ctx.job_id, ctx.restart_count, ctx.run) == ("90_1", "91", 2, 3)
    assert (ctx.log_dir, ctx.state_dir, ctx.preempt_signal, ctx.handler) == (
        "/logs/t-90_1",
        "/state",
        "USR1",
        "requeue",
    )
    assert (ctx.max_requeues, ctx.max_preemptions, ctx.requeue_on_failure, ctx.in_container) == (3, None, True, True)
    assert (ctx.start_time, ctx.time_limit, ctx.lead_time, ctx.lead_seconds) == (1000.0, 3600.0, 120.0, 120)
    assert (ctx.spec_hash, ctx.signals) == ("abc", (("USR1", 1010.0),))
    assert JobContext.of(ctx) is ctx


def test_outside_slurm_and_outside_the_script_the_context_is_empty() -> None:
    ctx = JobContext.from_environ({})
    assert (ctx.key, ctx.run, ctx.log_dir, ctx.state_dir, ctx.preempt_signal) == (None, 1, None, None, None)
    assert (ctx.handler, ctx.max_requeues, ctx.in_container, ctx.start_time) == (
        contract.HANDLER_AUTO,
        None,
        False,
        None,
    )


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({"SLURM_JOB_ID": "12; rm"}, "is not a number"),
        ({"SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": "-1"}, "negative"),
        ({"SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": "x"}, "not an integer"),
    ],
)
def test_a_bad_slurm_variable_is_one_clear_error(environ: dict[str, str], problem: str) -> None:
    with pytest.raises(RuntimeSetupError, match=problem):
        JobContext.from_environ(environ)


CASES = [
    {"SLURM_JOB_ID": "15"},
    {"SLURM_JOB_ID": "16", "SLURM_ARRAY_JOB_ID": "15", "SLURM_ARRAY_TASK_ID": "1"},
    {"SLURM_JOB_ID": "15", "SLURM_ARRAY_JOB_ID": "15", "SLURM_ARRAY_TASK_ID": "0"},
]


@pytest.mark.parametrize("environ", CASES)
def test_the_scripts_key_is_the_python_rules_key(environ: dict[str, str]) -> None:
    """The rendered script's `_sg_key` (bash, KEY_SHELL) and the runtime's key agree for every form Slurm exports."""
    out = subprocess.run(
        ["bash", "-c", KEY_SHELL + '\nprintf %s "${_sg_key}"'], env=environ, capture_output=True, text=True, check=True
    )
    assert out.stdout == key_from(environ)


@pytest.mark.parametrize("environ", CASES)
def test_the_local_scontrol_and_the_cli_take_the_same_key(environ: dict[str, str], tmp_path: Path) -> None:
    key = key_from(environ)
    assert key is not None and parse_job_id(key).requeue_target() == key
    local = {**environ, "SLURMGEN_LOCAL_DIR": str(tmp_path)}
    assert fake_requeue(["Incomplete", key], local) == ""
    with pytest.raises(ScontrolError, match="Invalid job id"):
        fake_requeue(["Incomplete", "999"], local)


def test_the_history_object_answers_the_questions_the_decisions_ask(tmp_path: Path) -> None:
    write_three_runs(tmp_path)
    history = run_history.History.load(str(tmp_path))
    assert history.events == run_history.read(str(tmp_path))
    assert history.counts() == run_history.Counts(own=1, preemptions=1, external=0)
    saved = history.last_save()
    assert saved is not None and saved.run == 2 and saved.save_seconds == 50.0
    run1 = history.run(1)
    assert run1 is not None and run1.cause == run_history.PREEMPTION and history.run(9) is None
    assert history.site_mode(1) == "REQUEUE" and history.site(1)["version"] == "22.05.8"
    assert [e["event"] for e in history.of_run(2, run_history.STOP)] == [run_history.STOP]
    assert history.has(2, run_history.REQUEUE) and not history.has(3, run_history.REQUEUE)
    assert history.stop_by(2, "other actions") is None
    assert len(history.all(run_history.SAVE)) == 2
    assert history.last_time(2, run_history.RUN_START) > history.last_time(1, run_history.RUN_START) > 0
    assert history.last_restart_time(2) == 0.0


def test_an_absent_history_is_empty_not_an_error(tmp_path: Path) -> None:
    for history in (run_history.History.load(None), run_history.History.load(str(tmp_path / "nothing"))):
        assert (history.runs(), history.counts(), history.last_save()) == ([], run_history.Counts(0, 0, 0), None)
        assert not history.announced(1) and history.site(1) == {}
