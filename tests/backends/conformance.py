"""One set of tests for every kind of job (slurmgen.backends): submit, status, logs, cancel, requeue, resume,
history and report, asked through the Python API (`slurmgen.Job`) and, for what a kind cannot do, through the CLI
too: the same one line from both doors. The kinds: Slurm on this machine and Slurm over ssh (the real test cluster
and its login node behind sshd), local emulation (`slurmgen run`), and a kind that exists only in the tests
(recorded_kind.py: one module and one registry row).

The test functions are here once; test_conformance.py runs them over the kinds of this machine, and
test_conformance_cluster.py over the two that need the real cluster."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import slurmgen
from slurmgen.backends import registry
from slurmgen.backends.interface import Backend, Request
from slurmgen.cli.app import main
from slurmgen.errors import UsageError
from slurmgen.submission.source import SpecSource

from .recorded_kind import row

HELLO = "conformance says hello"
LONG = 240.0  # seconds: the test cluster is shared, a job may pend a while


@dataclass(frozen=True)
class Door:
    backend: Backend
    spec: Path
    runs_script: bool = True  # the kind runs the rendered script, whose batch shell keeps the run history
    # a spec whose job runs for minutes, for a kind whose launch returns while the job goes on; None for a kind
    # whose launch returns once the job has ended (a local run, in the foreground)
    sleeper: Path | None = None


def _spec(where: Path, name: str, program: str = f"print({HELLO!r})", python: str = sys.executable) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.yaml"
    command = json.dumps([python, "-c", program])
    # python: the interpreter of the batch helper and the task supervisor, which must import slurmgen (the
    # default, python3 on the nodes' PATH, is the system's here, without it)
    path.write_text(f'name: {name}\ncommand: {command}\npython: {python}\ntime: "5:00"\npreemption: false\n')
    return path


SLEEP = "import time; time.sleep(300)"


def open_door(kind: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
              ) -> Iterator[Door]:  # fmt: skip
    """The backend of ``kind`` and a spec to submit to it, with a journal of the test's own."""
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    if kind == "recorded":
        monkeypatch.setitem(registry.KINDS, "recorded", row(tmp_path / "recorded"))
        spec = _spec(work, "conf-rec")
        monkeypatch.chdir(work)
        yield Door(registry.backend_named("recorded"), spec, runs_script=False)
    elif kind == "local":
        spec = _spec(work, "conf-local")
        monkeypatch.chdir(work)
        yield Door(registry.backend_named("local"), spec)
    elif kind == "slurm":
        cluster = request.getfixturevalue("slurm_cluster")
        for key, value in cluster.env.items():
            monkeypatch.setenv(key, value)
        spec = _spec(work, "conf-slurm")
        monkeypatch.chdir(work)
        yield Door(registry.backend_for(None), spec, sleeper=_spec(work, "conf-slurm-sleep", SLEEP))
    else:
        from remote.cluster_login import SECRET, client_env, project, start_login

        cluster = request.getfixturevalue("slurm_cluster")
        login = start_login(cluster, otp_secret=SECRET, bastion=True)
        try:
            repo = project(login, "proj", "conf-ssh", f"print({HELLO!r})\n", "preemption: false\n")
            for key, value in client_env(login).items():
                monkeypatch.setenv(key, value)
            monkeypatch.chdir(repo)
            from slurmgen.spec.profile import find_profile

            sleeper = _spec(repo, "conf-ssh-sleep", SLEEP, "python3")
            yield Door(registry.backend_for(find_profile("alpha", repo)), repo / "job.yaml", sleeper=sleeper)
        finally:
            login.close_master()
            login.remove()


def _launched(door: Door) -> slurmgen.Job:
    done = door.backend.launch(Request(SpecSource(door.spec, ())), lambda line: None)
    job = slurmgen.Job(done.label)
    if door.sleeper is not None:  # its launch returns while the job goes on
        job.wait(timeout=LONG)
    return job


def _one_line(exc: UsageError) -> str:
    line = str(exc)
    assert line and "\n" not in line, line
    return line


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_gives_the_id_that_status_and_logs_take(door: Door) -> None:
    job = _launched(door)
    assert job.state() == "COMPLETED"
    assert job.exit_code == 0
    status = job.handle.status()
    assert job.id in "\n".join(status.out)
    assert HELLO in job.logs()
    own = door.backend.job(job.id)  # the backend's own door to the id it gave: the same job
    assert own.label == job.id and own.state() == "COMPLETED"


def test_history_and_report_read_the_finished_job(door: Door) -> None:
    job = _launched(door)
    runs = job.history()
    if door.runs_script:
        assert len(runs) == 1 and runs[0]["exit_code"] == 0, runs
    report = job.report()
    assert isinstance(report, dict) and report


@pytest.mark.parametrize("question", ["cancel", "requeue", "resume"])
def test_an_ended_job_answers_or_says_why_not_in_one_line_through_every_door(
    door: Door, question: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ended job: cancel has nothing to cancel, requeue (without --finished) and resume may refuse; whatever a
    kind says, it says it in one line, and the CLI says the same line."""
    job = _launched(door)
    capsys.readouterr()
    try:
        if question == "cancel":
            job.cancel()
        elif question == "requeue":
            job.requeue()
        else:
            job.resume()
    except UsageError as exc:
        line = _one_line(exc)
        code, _, err = _cli(capsys, question, job.id)
        assert code != 0 and line in err, err
    else:
        code, _, err = _cli(capsys, question, job.id)
        assert code == 0 or question != "cancel", err


def test_what_a_kind_cannot_do_is_one_line_from_the_backend(door: Door) -> None:
    """Every question in `cannot` raises exactly its line; the others answer."""
    request = Request(SpecSource(door.spec, ()))
    for question, line in door.backend.cannot.items():
        if question not in ("dry_run", "would_run", "follow", "site_client"):
            continue
        with pytest.raises(UsageError) as caught:
            if question == "site_client":
                door.backend.site_client()
            elif question == "dry_run":
                door.backend.dry_run(request, lambda said: None)
            elif question == "would_run":
                door.backend.would_run(request, lambda said: None)
            else:
                door.backend.follow("1", lambda said: None)
        assert str(caught.value) == line
    if "dry_run" not in door.backend.cannot:
        shown = door.backend.dry_run(request, lambda said: None)
        assert shown.script and shown.lines


def test_cancel_ends_a_job_that_has_not_ended(door: Door) -> None:
    """A kind whose launch returns while the job goes on cancels it: the job ends CANCELLED. A kind whose launch
    returns once the job has ended has nothing left to cancel, and says so in one line."""
    if door.sleeper is None:
        job = _launched(door)
        said = job.handle.cancel(None, None)
        assert len(said.notes) == 1 and "nothing to cancel" in said.notes[0], said
        return
    done = door.backend.launch(Request(SpecSource(door.sleeper, ())), lambda line: None)
    job = slurmgen.Job(done.label)
    job.cancel()
    assert job.wait(timeout=LONG) == "CANCELLED"
