"""A lead time cut to a quarter of a short limit (lead_time left out, limit under 20 minutes) is said once on stderr
by every command that loads the spec (render, validate, submit, submit --dry-run, run), never in the script and
never as a warning; a spec that writes lead_time, or has a limit that leaves the default, hears nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from fake_slurm import FakeSlurm
from sweep.sweep_data import SWEEP_SPEC

from .cli_setup import install_fake, run

CONFIG = "SLURM_VERSION = 22.05.8\nKillWait = 5 sec\nMaxArraySize = 1001\n"
JOB = 'name: short\ncommand: [python3, -c, "print(1)"]\ntime: "00:15:00"\n'
NOTE = (
    "note: job.yaml:3: preemption.lead_time: not given, so 225 s, a quarter of the 00:15:00 limit: the default 300 s "
    "is for limits of 00:20:00 or more, and would take too much of a shorter job; give lead_time to choose"
)
SAID = "preemption.lead_time: not given"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Stand-in Slurm commands alone on PATH (sbatch answers job 7), in a work directory holding job.yaml."""
    fake = FakeSlurm().on("sbatch", out="7\n").on("scontrol", "show", "config", out=CONFIG).on("squeue", out="")
    install_fake(fake, tmp_path, monkeypatch)
    Path("job.yaml").write_text(JOB)
    return fake


@pytest.mark.parametrize(
    "argv",
    [("render",), ("validate",), ("validate", "--strict"), ("submit", "--dry-run"), ("submit",)],
    ids=["render", "validate", "validate-strict", "dry-run", "submit"],
)
def test_a_cut_lead_time_is_one_note_on_stderr(
    argv: tuple[str, ...], fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *argv, "job.yaml")
    assert code == 0, err
    assert [line for line in err.splitlines() if SAID in line] == [NOTE], err
    assert "warning" not in err and SAID not in out  # a note, and never in the script or the job id
    if argv[0] == "render":
        assert "#SBATCH --signal='B:USR1@225'" in out  # the value the note says is the one the script asks for
    if argv == ("submit",):
        assert out == "7\n" and len(fake.commands("sbatch")) == 1


def test_the_note_names_the_lead_time_the_limit_gives(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    """Just under 20 minutes the quarter is 285 s; set with --set, the limit's place is --set."""
    code, out, err = run(capsys, "render", "job.yaml", "--set", "time=00:19:00")
    assert code == 0 and "#SBATCH --signal='B:USR1@285'" in out
    assert err.splitlines() == [
        "note: --set: preemption.lead_time: not given, so 285 s, a quarter of the 00:19:00 limit: the default 300 s "
        "is for limits of 00:20:00 or more, and would take too much of a shorter job; give lead_time to choose"
    ]


@pytest.mark.parametrize(
    "spec",
    [
        JOB.replace("00:15:00", "00:20:00"),  # a quarter is 300 s: the default itself
        JOB.replace("00:15:00", "1-00:00:00"),
        JOB + "preemption: {lead_time: 225}\n",  # the same value, written: chosen, so nothing to explain
        JOB + "preemption: false\n",
    ],
    ids=["20-minutes", "a-day", "lead-time-given", "preemption-off"],
)
def test_no_note_when_the_lead_time_is_written_or_the_default(
    spec: str, fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("job.yaml").write_text(spec)
    assert run(capsys, "render", "job.yaml")[::2] == (0, "")
    assert run(capsys, "validate", "--strict", "job.yaml")[::2] == (0, "ok: job.yaml\n")
    code, _, err = run(capsys, "submit", "--dry-run", "job.yaml")
    assert code == 0 and SAID not in err, err
    code, _, err = run(capsys, "render", "job.yaml", "--set", "preemption.lead_time=100")
    assert (code, err) == (0, "")  # given on the command line is given too


def test_validate_strict_fails_on_a_warning_and_still_notes_the_cut_once(
    fake: FakeSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("job.yaml").write_text(JOB + "mem: 32\n")  # a unit-less mem: a warning
    code, _, err = run(capsys, "validate", "--strict", "job.yaml")
    lines = err.splitlines()
    assert code != 0 and lines[0].startswith("error: job.yaml:4: mem: 32 without a unit") and lines[1:] == [NOTE]


def test_a_sweep_says_it_once_not_once_per_point(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    Path("sw.yaml").write_text(SWEEP_SPEC.format(output="logs", lrs=[1, 2], seeds=[3, 4], extra=""))
    for argv in (("render",), ("validate",), ("submit", "--dry-run"), ("submit",)):
        code, out, err = run(capsys, *argv, "sw.yaml")
        assert code == 0, err
        assert err.count(SAID) == 1 and SAID not in out, err
        assert "sw.yaml:3: preemption.lead_time: not given, so 75 s, a quarter of the 00:05:00 limit" in err


def test_slurmgen_run_says_it_with_its_other_notes_once(tmp_path: Path) -> None:
    """A job run here: one line, as the runner's other notes (`slurmgen: local-N: ...`); a sweep of two points run
    here: one line for the sweep, none from its points."""
    env = {**os.environ, "SLURMGEN_HOME": str(tmp_path / "home")}
    (tmp_path / "job.yaml").write_text(JOB)
    done = run_slurmgen("run", "job.yaml", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    said = [line for line in (done.stderr + done.stdout).splitlines() if SAID in line]
    assert len(said) == 1 and said[0].startswith("slurmgen: local-") and said[0].endswith(NOTE.removeprefix("note: "))

    (tmp_path / "train.py").write_text("import sys\nprint(sys.argv[1:])\n")
    (tmp_path / "sw.yaml").write_text(SWEEP_SPEC.format(output="logs", lrs=[1, 2], seeds=[3], extra=""))
    done = run_slurmgen("run", "sw.yaml", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    said = [line for line in (done.stderr + done.stdout).splitlines() if SAID in line]
    assert len(said) == 1 and said[0].startswith("slurmgen: sweep sw-local-"), done.stderr
    assert "sw.yaml:3: preemption.lead_time: not given, so 75 s" in said[0]
