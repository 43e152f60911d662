"""Files the user names for a result (`render -o FILE`, `report --html FILE`, slurmgen/cli/output_file.py): never
written through a link another user planted in a sticky directory, never opened when a FIFO (which blocked), never
a link replaced by a file; and the rehearsals of one job refused on an array instead of dropped."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen, slurmgen_argv

from security.other_users import need_root, plant

BASE = 'name: x\ncommand: [python3, -c, "1"]\ntime: "00:10:00"\n'


@pytest.fixture
def sticky() -> Iterator[Path]:
    """A world-writable sticky directory, as /tmp is, that the planter can reach."""
    place = Path(tempfile.mkdtemp(prefix="slurmgen-sticky-", dir="/tmp"))
    place.chmod(0o1777)
    yield place
    shutil.rmtree(place)


def test_report_html_never_writes_through_another_users_link_in_a_sticky_directory(sticky: Path) -> None:
    need_root()
    victim = sticky.parent / f"{sticky.name}-victim"
    victim.write_text("the victim's own file\n")
    try:
        plant(f"ln -s {victim} {sticky}/report.html")
        done = run_slurmgen("report", "local-1", "--html", str(sticky / "report.html"), cwd=sticky)
        assert done.returncode != 0
        (line,) = done.stderr.strip().splitlines()
        assert f"--html {sticky}/report.html: is a symbolic link (to {victim})" in line, line
        assert victim.read_text() == "the victim's own file\n"  # was: the page written into it
        assert (sticky / "report.html").is_symlink() and os.lstat(sticky / "report.html").st_uid == 65534
        plant(f"echo theirs > {sticky}/page.html")  # another user's regular file: named, not a bare EPERM
        theirs = run_slurmgen("report", "local-1", "--html", str(sticky / "page.html"), cwd=sticky)
        assert theirs.returncode != 0 and "is owned by uid 65534, not by this user" in theirs.stderr, theirs.stderr
        assert (sticky / "page.html").read_text() == "theirs\n"
    finally:
        victim.unlink()


def test_report_html_refuses_a_fifo_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "page.html")
    done = subprocess.run(slurmgen_argv("report", "local-1", "--html", "page.html"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip  # was: blocked
    assert done.returncode != 0
    assert done.stderr.strip() == "error: --html page.html: is a FIFO, not a regular file; give a file name"
    assert (tmp_path / "page.html").is_fifo()


def test_render_o_refuses_a_link_and_takes_dev_stdout_as_standard_output(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(BASE)
    (tmp_path / "out").symlink_to("/proc/self/fd/1")
    with (tmp_path / "printed").open("w") as printed:  # stdout a regular file: the link led to one
        done = subprocess.run(slurmgen_argv("render", "x.yaml", "-o", "out"), cwd=tmp_path, stdout=printed,
                              stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip
    assert done.returncode != 0
    assert (
        "-o out: is a symbolic link (to /proc/self/fd/1)" in done.stderr and "-o - for standard output" in done.stderr
    )
    assert (tmp_path / "out").is_symlink()  # was: replaced by a regular file, and nothing printed
    mine = tmp_path / "mine.sbatch"
    mine.write_text("old\n")
    (tmp_path / "link.sbatch").symlink_to(mine)
    assert run_slurmgen("render", "x.yaml", "-o", "link.sbatch", cwd=tmp_path).returncode != 0
    assert mine.read_text() == "old\n" and (tmp_path / "link.sbatch").is_symlink()
    shown = run_slurmgen("render", "x.yaml", "-o", "/dev/stdout", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("#!/bin/bash"), shown.stderr
    assert Path("/dev/stdout").is_symlink()


@pytest.mark.parametrize(
    ("spec", "flags", "said"),
    [
        (
            'array: "0-1"\n',
            ["--kill-rank", "0", "--after", "1"],
            "--kill-rank: a rehearsal of one job, and x.yaml is an array",
        ),
        ('array: "0-1"\n', ["--hang-rank", "0", "--after", "1"], "--hang-rank: a rehearsal of one job"),
        (
            'sweep:\n  grid:\n    lr: [1, 2]\nrecovery:\n  health_check: ["true"]\n',
            ["--bad-node", "1"],
            "--bad-node: a rehearsal of one job, and x.yaml is a sweep",
        ),
    ],
)
def test_a_rehearsal_on_an_array_or_a_sweep_is_refused_in_one_line(
    tmp_path: Path, spec: str, flags: list[str], said: str
) -> None:
    base = BASE.replace('"1"]', '"1", "--lr={lr}"]') if "sweep" in spec else BASE
    (tmp_path / "x.yaml").write_text(base + spec)
    done = run_slurmgen("run", "x.yaml", *flags, cwd=tmp_path)
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert said in line, line  # was: every task ran, the rehearsal silently dropped
    assert not (tmp_path / "logs").exists()
