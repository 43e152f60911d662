"""The job commands end to end in-process, with stand-in Slurm commands on PATH that replay recorded output:
what goes to stdout and stderr, exit codes, and that nothing is created when it must not be."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_job import DATA, HANDWRITTEN, SPEC

from slurmgen import cli_fast
from slurmgen.cli import main

FAKE = """\
#!/bin/bash
# A stand-in for a Slurm command: logs its argv and environment, replays what the test put in place.
PATH=/usr/bin:/bin  # for cat and friends; the test's own PATH holds no real Slurm command
d="$(dirname "$0")/answers"
printf '%s\\n' "$(basename "$0") $*" >> "$d/calls"
/usr/bin/env -0 > "$d/$(basename "$0").env"
[ -f "$d/$(basename "$0").out" ] && cat "$d/$(basename "$0").out"
[ -f "$d/$(basename "$0").err" ] && cat "$d/$(basename "$0").err" >&2
exit "$(cat "$d/$(basename "$0").rc" 2>/dev/null || echo 0)"
"""


class Fake:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.answers = bin_dir / "answers"
        self.answers.mkdir(parents=True)
        for name in ("sbatch", "scontrol", "squeue", "scancel"):
            (bin_dir / name).write_text(FAKE)
            (bin_dir / name).chmod(0o755)

    def answer(self, command: str, out: str = "", err: str = "", rc: int = 0) -> None:
        (self.answers / f"{command}.out").write_text(out)
        (self.answers / f"{command}.err").write_text(err)
        (self.answers / f"{command}.rc").write_text(str(rc))

    def calls(self) -> list[str]:
        path = self.answers / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def env(self, command: str) -> dict[str, str]:
        lines = (self.answers / f"{command}.env").read_text().split("\0")
        return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    fake = Fake(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(fake.bin))  # only the stand-ins: never the real Slurm of this machine
    monkeypatch.delenv("SLURMGEN_HOME", raising=False)
    monkeypatch.delenv("SLURMGEN_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "tiny.yaml").write_text(SPEC.format(output="logs"))
    return fake


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_prints_the_job_id_alone(fake: Fake, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    fake.answer("sbatch", (HANDWRITTEN / "handwritten-sbatch-banner.out").read_text())
    monkeypatch.setenv("SBATCH_TIMELIMIT", "1")  # would silently override the script's --time
    monkeypatch.setenv("SLURM_JOB_ID", "5")  # left over from an enclosing allocation
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/other.conf")
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (0, "4567\n")
    assert "submitted job 4567" in err
    (call,) = fake.calls()
    assert call.startswith("sbatch --parsable --comment=slurmgen:") and call.endswith("/job.sbatch")
    env = fake.env("sbatch")
    assert "SBATCH_TIMELIMIT" not in env and "SLURM_JOB_ID" not in env
    assert env["SLURM_CONF"] == "/etc/slurm/other.conf"


def test_dry_run_prints_the_real_script_and_command_and_touches_nothing(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    code, rendered, _ = run(capsys, "render", "tiny.yaml")
    assert code == 0
    code, out, err = run(capsys, "submit", "tiny.yaml", "--dry-run")
    assert (code, out) == (0, rendered)
    assert "would run: sbatch --parsable --comment=slurmgen:" in err and "would create " in err
    assert fake.calls() == [] and sorted(p.name for p in Path.cwd().iterdir()) == ["tiny.yaml"]


def test_sbatch_missing_is_one_line_and_exit_4(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    os.unlink(fake.bin / "sbatch")
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (4, "")
    assert err.count("\n") == 1 and err.startswith("error: sbatch not found") and "--dry-run" in err
    assert sorted(p.name for p in Path.cwd().iterdir()) == ["tiny.yaml"]


def test_sbatch_failure_is_its_message_not_a_traceback(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", err="sbatch: error: Batch job submission failed: Invalid account\n", rc=1)
    code, out, err = run(capsys, "submit", "tiny.yaml")
    assert (code, out) == (3, "")
    assert err == "error: sbatch failed (exit 1): Batch job submission failed: Invalid account\n"


def test_unwritable_output_fails_before_sbatch(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    Path("afile").write_text("")
    code, out, err = run(capsys, "submit", "tiny.yaml", "--set", "output=afile/logs")
    assert (code, out) == (2, "")
    assert err.startswith("error: tiny.yaml: output: cannot write to ") and "Not a directory" in err
    assert fake.calls() == []


def test_test_only_reports_without_submitting(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", err=(DATA / "sbatch-test-only.err").read_text())
    code, out, _ = run(capsys, "submit", "tiny.yaml", "--test-only")
    assert code == 0 and out.startswith("job tiny can run: it would start at ") and "on node1" in out
    fake.answer("sbatch", err=(DATA / "sbatch-test-only-too-large.err").read_text(), rc=1)
    code, out, err = run(capsys, "submit", "tiny.yaml", "--test-only", "--set", "nodes=4")
    assert (code, out) == (3, "")
    assert "cannot run on this cluster" in err and "Requested node configuration is not available" in err
    assert not Path(".slurmgen").exists()


def test_wait_exits_with_the_jobs_exit_code(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", "15\n")
    fake.answer("scontrol", (DATA / "show-job-o-failed.out").read_text())  # FAILED, ExitCode=3:0
    code, out, err = run(capsys, "submit", "tiny.yaml", "--wait")
    assert (code, out) == (3, "15\n")
    assert "slurmgen: job 15 FAILED with exit code 3" in err


def test_status_of_the_journal_and_of_one_job(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", "15\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    fake.answer("scontrol", (DATA / "show-job-o-failed.out").read_text())
    for argv in (("status",), ("status", "15"), ("status", "tiny.yaml"), ("status", "tiny")):
        code, out, _ = run(capsys, *argv)
        header, row = out.splitlines()
        assert code == 0 and header.split()[:3] == ["JOB", "NAME", "STATE"], argv
        assert row.split()[:3] == ["15", "bad", "FAILED"]  # the recorded job's name
    fake.answer("scontrol", err="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    code, out, _ = run(capsys, "status")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["15", "tiny", "gone"]  # from the journal
    code, out, err = run(capsys, "status", "15;rm")
    assert code == 2 and "not a Slurm job id" in err


def test_requeue_refuses_a_whole_array(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("scontrol", (DATA / "show-job-o-array.out").read_text())
    code, _, err = run(capsys, "requeue", "11")
    assert code == 2 and "would requeue every task" in err and "e.g. 11_2" in err
    assert fake.calls() == ["scontrol --oneliner show job 11"]


def test_logs_prints_every_file_with_its_name(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", "15\n")
    assert run(capsys, "submit", "tiny.yaml")[0] == 0
    fake.answer("scontrol", (DATA / "show-job-o-failed.out").read_text())
    Path("logs/tiny-15").mkdir()
    Path("logs/tiny-15.log").write_text("slurmgen: job 15, run 1\nslurmgen: job 15, run 2\n")
    Path("logs/tiny-15/node2.log").write_text("rank 2\n")
    Path("logs/tiny-15/node1.log").write_text("rank 0\n")
    code, out, _ = run(capsys, "logs", "15")
    assert code == 0
    assert out == (
        "==> logs/tiny-15.log <==\nslurmgen: job 15, run 1\nslurmgen: job 15, run 2\n\n"
        "==> logs/tiny-15/node1.log <==\nrank 0\n\n==> logs/tiny-15/node2.log <==\nrank 2\n"
    )
    code, out, _ = run(capsys, "logs", "tiny", "--node", "node2")
    assert (code, out) == (0, "==> logs/tiny-15/node2.log <==\nrank 2\n")
    code, out, err = run(capsys, "logs", "15", "--node", "node3")
    assert code == 2 and "nodes with logs: node1, node2" in err


def test_cancel_with_a_signal_goes_through_the_batch_shell_of_a_slurmgen_job(
    fake: Fake, capsys: pytest.CaptureFixture[str]
) -> None:
    record = (DATA / "show-job-o-running.out").read_text()
    fake.answer("scontrol", record.rstrip("\n") + " Comment=slurmgen:T\n")
    code, _, err = run(capsys, "cancel", "7", "--signal", "SIGUSR2")
    assert code == 0 and "sending SIGUSR2 to 7 (batch:" in err
    assert fake.calls()[-1] == "scancel --signal=USR2 --batch 7"
    code, _, _ = run(capsys, "cancel", "7", "--signal", "INT")  # not trapped by the script: to the steps
    assert code == 0 and fake.calls()[-1] == "scancel --signal=INT 7"
    code, _, _ = run(capsys, "cancel", "7", "--signal", "USR2", "--to", "all")
    assert code == 0 and fake.calls()[-1] == "scancel --signal=USR2 --full 7"
    code, _, _ = run(capsys, "cancel", "7")
    assert code == 0 and fake.calls()[-1] == "scancel 7"
    code, _, err = run(capsys, "cancel", "7", "--signal", "NOPE")
    assert code == 2 and "not a signal name" in err


def test_no_traceback_anywhere_when_slurm_is_missing(
    fake: Fake, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.rmtree(fake.bin)
    for argv in (("status", "12"), ("requeue", "12"), ("cancel", "12"), ("logs", "12")):
        code, _, err = run(capsys, *argv)
        assert code == 4 and err.startswith("error: scontrol: command not found"), argv


def test_the_fast_lane_submits_exactly_like_typer(fake: Fake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.answer("sbatch", "15\n")
    Path("tiny.yaml").write_text(SPEC.format(output="logs") + 'env: {SLURM_X: "1"}\n')  # a spec with a warning
    fast = (cli_fast.run(["submit", "tiny.yaml"]), *capsys.readouterr())
    slow = (main(["submit", "tiny.yaml"]), *capsys.readouterr())
    fast_again = (cli_fast.run(["submit", "tiny.yaml"]), *capsys.readouterr())  # a render cache hit
    tokens = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}")
    assert fast[1] == "15\n" and "warning: " in fast[2]
    assert {(code, out, tokens.sub("T", err)) for code, out, err in (fast, slow, fast_again)} == {
        (fast[0], fast[1], tokens.sub("T", fast[2]))
    }
    runs = sorted(Path(".slurmgen/runs/tiny").iterdir())
    assert len(runs) == 3 and len({(r / "spec.resolved.json").read_text() for r in runs}) == 1


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["submit", "a.yaml"], ("a.yaml", [], None)),
        (["submit", "--set=nodes=2", "a.yaml", "-s", "x=1", "--templates", "t"], ("a.yaml", ["nodes=2", "x=1"], "t")),
        (["submit", "a.yaml", "--wait"], None),
        (["submit", "a.yaml", "--dry-run"], None),
        (["submit", "a.yaml", "-o", "x"], None),
        (["submit", "--help"], None),
        (["submit"], None),
    ],
)
def test_fast_lane_submit_shapes(argv: list[str], parsed: tuple[str, list[str], str | None] | None) -> None:
    assert cli_fast.parse_submit(argv) == parsed


def test_a_repeated_submit_imports_neither_typer_nor_yaml_nor_jinja(fake: Fake) -> None:
    fake.answer("sbatch", "15\n")
    code = (
        "import sys; sys.argv = ['slurmgen', 'submit', 'tiny.yaml']; import slurmgen.__main__ as m; rc = m.main(); "
        "heavy = sorted({'typer', 'yaml', 'jinja2', 'click'} & {n.split('.')[0] for n in sys.modules}); "
        "print(rc, heavy, file=sys.stderr)"
    )
    first, second = (subprocess.run([sys.executable, "-c", code], capture_output=True, text=True) for _ in "12")
    assert first.stdout == second.stdout == "15\n", (first.stderr, second.stderr)
    assert first.stderr.splitlines()[-1] == "0 ['jinja2', 'yaml']"  # the first one validates and renders
    assert second.stderr.splitlines()[-1] == "0 []"
