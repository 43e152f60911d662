"""One job interface (slurmgen.backends.interface): the CLI's job commands ask a handle and never test what kind of job
it is, and a job with no log yet has empty logs (a notebook polling a queued job's logs must not crash)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm

import slurmgen

from .cli_setup import install_fake, run

CLI = Path(slurmgen.__file__).parent / "cli"
JOB_COMMANDS = ("job_commands.py", "site_commands.py")  # submit/requeue/resume/status/logs/cancel; history
KIND_WORDS = {"local", "slurm", "sweep", "remote", "host"}
KIND_MODULES = ("slurmgen.local", "slurmgen.backends.emulated", "slurmgen.backends.slurm_here",
                "slurmgen.backends.slurm_ssh", "slurmgen.backends.groups", "slurmgen.remote",
                "slurmgen.submission.sweep_record", "slurmgen.api.sweep", "slurmgen.cli.sweep_commands")  # fmt: skip


def kind_branches(source: str) -> list[str]:
    """Where code looks at the kind of a job: imports a kind's own module, calls isinstance, reads an attribute
    named after a kind (`target.local`, `spec.sweep`) or compares with a kind's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            found += [f"{node.lineno}: import {n}" for n in names if n.startswith(KIND_MODULES)]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith(KIND_MODULES)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            found.append(f"{node.lineno}: isinstance")
        elif isinstance(node, ast.Attribute) and node.attr in KIND_WORDS:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Compare):
            words = [c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)]
            found += [f"{node.lineno}: == {w!r}" for w in words if isinstance(w, str) and w.lower() in KIND_WORDS]
    return found


# The job commands as they were before the job interface: each line is one way of branching on the kind.
BEFORE = """
def logs_command(job, follow_, node, rank, point):
    from slurmgen.cli.sweep_commands import point_job
    target = _target(point_job(job, point, "logs"))
    if not follow_ and not target.local:
        return
    def finished():
        if target.local:
            from slurmgen.local.local_jobs import live_runner
    if p.spec.sweep is not None:
        pass
    if kind == "local" or isinstance(target, Sweep):
        pass
"""


def test_the_check_sees_each_way_of_branching_on_the_kind() -> None:
    assert sorted(kind_branches(BEFORE), key=lambda f: int(f.split(":")[0])) == [
        "3: import slurmgen.cli.sweep_commands", "3: import slurmgen.cli.sweep_commands.point_job", "5: .local",
        "8: .local", "9: import slurmgen.local.local_jobs", "9: import slurmgen.local.local_jobs.live_runner",
        "10: .sweep", "12: == 'local'", "12: isinstance",
    ]  # fmt: skip


@pytest.mark.parametrize("module", JOB_COMMANDS)
def test_the_job_commands_do_not_branch_on_the_kind_of_job(module: str) -> None:
    assert kind_branches((CLI / module).read_text(encoding="utf-8")) == []


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm()
    for command in ("sbatch", "scontrol", "squeue", "scancel"):
        fake.on(command)
    return install_fake(fake, tmp_path, monkeypatch)


PENDING = "JobId=15 JobName=tiny JobState=PENDING Reason=Priority Restarts=0 ExitCode=0:0 NodeList=(null)\n"


def test_logs_of_a_pending_job_are_empty_not_an_error(fake: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on("sbatch", out="15\n")
    code, out, _ = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (0, "15\n")
    fake.on("scontrol", out=PENDING)
    code, out, err = run(capsys, "logs", "15")
    assert (code, out) == (0, "")  # the id submit printed, taken as it is
    assert err.count("\n") == 1 and "no log files yet" in err and "It is PENDING" in err
    assert slurmgen.Job("15").logs() == ""
    assert slurmgen.Job("15").logs(rank=0) == ""
    Path("logs/tiny-15").mkdir(parents=True)
    Path("logs/tiny-15/node1.log").write_text("up\n")
    with pytest.raises(slurmgen.UsageError, match="no log of node node9"):  # logs there, but not that node's
        slurmgen.Job("15").logs(node="node9")
