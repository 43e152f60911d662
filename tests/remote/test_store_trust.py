"""The cluster's side of a remote job is trusted only where it is the user's own: a real sshd is the login node, and
another local user (the planter, uid 65534) makes the workdir first in a shared scratch, plants an object under
the hash of train.py, a snapshot, a run's script for `resume`, or a log directory; a group-writable team workdir is
refused by default; `workdir: ~/x` and a relative workdir land in the remote home of a real second login user."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from security.other_users import PLANTER, need_root, plant
from ssh_server import Sshd, add_login_user, start_sshd

from remote.test_remote_before_queue import project as before_queue_project
from remote.test_remote_before_queue import stand_ins
from remote.test_snapshot import git
from slurmgen.backends.slurm_ssh.mirror import mirror
from slurmgen.backends.slurm_ssh.once import once_script, resubmit_remote, send_once
from slurmgen.backends.slurm_ssh.remote_status import remote_states
from slurmgen.backends.slurm_ssh.snapshot import package_snapshot, take_snapshot, upload
from slurmgen.backends.slurm_ssh.store_trust import remote_workdir
from slurmgen.backends.slurm_ssh.survey import survey
from slurmgen.errors import SpecError, UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.printable import printable_bytes
from slurmgen.remote.transport import LocalTransport
from slurmgen.spec.profile import parse_profiles

EVIL = b"print('planted')\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q")
    (root / "train.py").write_text("print('mine')\n")
    return root


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A shared scratch: anyone may create names in it (sticky, as /tmp)."""
    need_root()
    place = Path(tempfile.mkdtemp(prefix="slurmgen-scratch-"))
    place.chmod(0o1777)
    yield place
    shutil.rmtree(place, ignore_errors=True)


def one_line(caught: pytest.ExceptionInfo[UsageError]) -> str:
    line = str(caught.value)
    assert "\n" not in line
    return line


def test_a_workdir_another_user_made_first_is_refused_before_its_objects_are_used(
    sshd: Sshd, project: Path, scratch: Path
) -> None:
    work = scratch / "team"
    digest = hashlib.sha256(b"print('mine')\n").hexdigest()
    plant(f"mkdir -p {work}/objects {work}/snapshots && printf \"print('planted')\\n\" > {work}/objects/{digest}")
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            upload(take_snapshot(project), t, str(work))
        line = one_line(caught)
        assert f"{work} is owned by uid 65534, not by you (uid 0)" in line and "workdir" in line
        with pytest.raises(UsageError) as surveyed:
            survey(t, str(work), [package_snapshot()], None, None)
        assert "owned by uid 65534" in one_line(surveyed)
        assert os.listdir(work / "snapshots") == []  # nothing was built from the planted object
    finally:
        sshd.close_master()


def test_a_sticky_workdir_of_ones_own_is_used_and_a_name_planted_in_it_is_refused(
    sshd: Sshd, project: Path, scratch: Path
) -> None:
    """A workdir of the user's own that anyone may create names in (1777, as a scratch root): others cannot rename
    or remove the user's names there, so it is used; a name another user made in it first is refused on its own."""
    work = scratch / "mine"
    work.mkdir()
    work.chmod(0o1777)
    t = sshd.transport()
    try:
        stored = upload(take_snapshot(project), t, str(work))
        assert (Path(stored.path) / "train.py").read_text() == "print('mine')\n"
        assert stat.S_IMODE(os.stat(work / "objects").st_mode) == 0o700  # the store in it is private
        shutil.rmtree(work / "snapshots")
        plant(f"mkdir {work}/snapshots")  # another user takes the name before the next upload
        with pytest.raises(UsageError) as caught:
            upload(take_snapshot(project), t, str(work))
        assert f"{work}/snapshots is owned by uid 65534, not by you (uid 0)" in one_line(caught)
    finally:
        sshd.close_master()


def test_a_group_writable_team_workdir_is_refused_by_default(sshd: Sshd, project: Path, tmp_path: Path) -> None:
    work = tmp_path / "team"
    (work / "objects").mkdir(parents=True)
    work.chmod(0o700)
    (work / "objects").chmod(0o2775)  # a team's store: every member of the group writes it
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            upload(take_snapshot(project), t, str(work))
        line = one_line(caught)
        assert f"{work}/objects has mode 2775" in line and f"chmod go-w '{work}/objects'" in line
        assert not (work / "snapshots").exists()
    finally:
        sshd.close_master()


def test_an_object_whose_bytes_do_not_hash_to_its_name_is_sent_again(sshd: Sshd, project: Path, tmp_path: Path) -> None:
    work = tmp_path / "own"
    digest = hashlib.sha256(b"print('mine')\n").hexdigest()
    (work / "objects").mkdir(parents=True)
    (work / "objects" / digest).write_bytes(EVIL)  # a store of the user's own, its object damaged or swapped
    t = sshd.transport()
    try:
        stored = upload(take_snapshot(project), t, str(work))
        assert stored.files_sent == 1
        assert (Path(stored.path) / "train.py").read_text() == "print('mine')\n"
        assert (work / "objects" / digest).read_bytes() == b"print('mine')\n"
        assert (Path(stored.path).parent / "complete").is_file()
    finally:
        sshd.close_master()


def test_a_snapshot_without_its_marker_is_not_used(sshd: Sshd, project: Path, tmp_path: Path) -> None:
    work = tmp_path / "own"
    snap = take_snapshot(project)
    broken = work / "snapshots" / snap.digest / "files"
    broken.mkdir(parents=True)
    (broken / "train.py").write_bytes(EVIL)  # an upload cut before its end (no marker), or an older layout
    t = sshd.transport()
    try:
        assert snap.digest not in survey(t, str(work), [snap], None, None).stored
        stored = upload(snap, t, str(work))
        assert Path(stored.path) == broken
        assert (broken / "train.py").read_text() == "print('mine')\n"
        assert snap.digest in survey(t, str(work), [snap], None, None).stored
    finally:
        sshd.close_master()


def test_resume_refuses_a_run_directory_another_user_planted(sshd: Sshd, scratch: Path, tmp_path: Path) -> None:
    run = scratch / "runs" / "train" / "tok1"
    plant(f"mkdir -p {run} && printf '#!/bin/bash\\necho planted\\n' > {run}/job.sbatch")
    journal = Journal(tmp_path / "home")
    entry = Entry("submitted", "tok1", "train", "/spec.yaml", str(run), "job.sbatch", 0.0, "41", "alpha",
                  str(scratch / "logs"))  # fmt: skip
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            resubmit_remote(t, entry, "41", "tok2", journal, lambda: 1.0)
        assert f"{run} is owned by uid 65534" in one_line(caught)
        assert journal.entries() == []  # nothing was sent to sbatch
    finally:
        sshd.close_master()


def test_resume_refuses_a_script_that_is_a_link(sshd: Sshd, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "train" / "tok1"
    run.mkdir(parents=True)
    (tmp_path / "elsewhere.sbatch").write_text("#!/bin/bash\necho other\n")
    (run / "job.sbatch").symlink_to(tmp_path / "elsewhere.sbatch")
    entry = Entry("submitted", "tok1", "train", "/spec.yaml", str(run), "job.sbatch", 0.0, "41", "alpha", "/l")
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            resubmit_remote(t, entry, "41", "tok2", Journal(tmp_path / "home"), lambda: 1.0)
        assert f"{run}/job.sbatch is a symbolic link" in one_line(caught)
    finally:
        sshd.close_master()


def test_logs_from_a_log_directory_another_user_made_are_refused(sshd: Sshd, scratch: Path, tmp_path: Path) -> None:
    logs = scratch / "logs"
    plant(f"mkdir -p {logs}/train-41 && printf 'fake\\033]0;owned\\007\\n' > {logs}/train-41.log")
    copies = tmp_path / "copies"
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            mirror(t, str(logs), "train-41", copies)
        line = one_line(caught)
        assert f"{logs} is owned by uid 65534" in line and "none of its logs or history was read" in line
        assert not copies.exists()
        own = tmp_path / "own-logs"
        own.mkdir()
        (own / "train-41.log").write_bytes(b"step 1\n\x1b[2J\x1b]52;c;ZXZpbA==\x07done\n")
        assert mirror(t, str(own), "train-41", copies) > 0
        shown = printable_bytes((copies / "train-41.log").read_bytes())
        assert shown == b"step 1\n\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07done\n"
    finally:
        sshd.close_master()


def test_a_tilde_and_a_relative_workdir_are_placed_in_the_remote_home(sshd: Sshd, project: Path) -> None:
    user = add_login_user(sshd, "sgstore", "/bin/bash")
    try:
        t = user.transport(sshd)
        tilde = survey(t, "~/sg-store", [], None, None)
        assert tilde.workdir == f"{user.home}/sg-store"
        stored = upload(take_snapshot(project), t, tilde.workdir)  # what place() stores with: the resolved path
        assert (Path(stored.path) / "train.py").read_text() == "print('mine')\n"
        upload(take_snapshot(project), t, "~/sg-store")  # the store's own scripts resolve it the same way
        assert not (user.home / "~").exists()
        relative = survey(t, "rel/store", [], None, None)
        assert relative.workdir == f"{user.home}/rel/store"
        upload(take_snapshot(project), t, "rel/store")
        assert (user.home / "rel" / "store" / "snapshots").is_dir()
    finally:
        user.remove(sshd)


def test_another_users_home_as_workdir_is_one_line_naming_the_file_and_field() -> None:
    with pytest.raises(SpecError) as caught:
        parse_profiles("alpha: {host: login, workdir: ~bob/store}\n", "clusters.yaml")
    line = str(caught.value)
    assert "clusters.yaml:1" in line and "alpha.workdir" in line and "~/..." in line


def test_a_run_directory_another_user_made_first_gets_no_script(sshd: Sshd, scratch: Path, tmp_path: Path) -> None:
    runs = scratch / "runs"
    plant(f"mkdir -p {runs}/train && chmod 777 {runs}/train")
    run = runs / "train" / "tok1"
    journal = Journal(tmp_path / "home")
    base = Entry("submitting", "tok1", "train", "/spec.yaml", str(run), "job.sbatch", 0.0, cluster="alpha")
    t = sshd.transport()
    try:
        command = once_script(str(run), str(tmp_path / "logs"), "", None, "tok1")
        with pytest.raises(UsageError) as caught:
            send_once(t, command, b"#!/bin/bash\necho mine\n", base, journal, lambda: 1.0, lambda line: None)
        assert f"{runs}/train is owned by uid 65534" in one_line(caught)
        assert not run.exists()  # neither the run's directory nor its script was made
        assert [e.event for e in journal.entries()] == ["submitting", "failed"]
    finally:
        sshd.close_master()


def test_the_workdir_word_is_the_remote_home_for_a_tilde_or_a_relative_path() -> None:
    assert remote_workdir("~") == '"$HOME"'
    assert remote_workdir("~/my store") == "\"$HOME\"/'my store'"
    assert remote_workdir("rel") == '"$HOME"/rel'
    assert remote_workdir("/abs/x") == "/abs/x"
    with pytest.raises(UsageError, match="~name"):
        remote_workdir("~bob/x")


def test_submit_to_a_workdir_another_user_made_first_is_one_line_and_no_sbatch(scratch: Path, tmp_path: Path) -> None:
    server = start_sshd(path_prepend=str(stand_ins(tmp_path)))
    try:
        repo, env = before_queue_project(server, tmp_path, "python3")
        planted = scratch / "work"
        plant(f"mkdir -p {planted}")
        (repo / "clusters.yaml").write_text(f"alpha:\n  host: {server.alias}\n  workdir: {planted}\n")
        refused = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
        assert refused.returncode != 0 and refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith(f"error: cluster alpha: {planted} is owned by uid 65534, not by you")
        assert not (tmp_path / "sbatch.log").exists() and os.listdir(planted) == []
        own = tmp_path / "own-work"
        (repo / "clusters.yaml").write_text(f"alpha:\n  host: {server.alias}\n  workdir: {own}\n")
        through = run_slurmgen("submit", "--cluster", "alpha", "job.yaml", cwd=repo, env=env)
        assert (through.returncode, through.stdout) == (0, "41\n"), through.stderr
        assert len(list((own / "snapshots").glob("*/complete"))) == 2  # the project's and slurmgen's own modules
    finally:
        server.close_master()
        server.remove()


def test_a_shared_workdir_keeps_each_users_files_in_a_directory_of_their_own(
    sshd: Sshd, project: Path, scratch: Path
) -> None:
    team = scratch / "team"
    team.mkdir()
    os.chown(team, 0, PLANTER)  # the planter is a member of the team's group
    team.chmod(0o2775)  # the team's group writes it, not sticky: a member could swap another's directory
    t = sshd.transport()
    try:
        with pytest.raises(UsageError) as caught:
            survey(t, str(team), [], None, None, shared=True)
        assert f"{team} has mode 2775" in one_line(caught) and f"chmod +t '{team}'" in one_line(caught)
        team.chmod(0o3775)
        mine = survey(t, str(team), [], None, None, shared=True)
        assert mine.workdir == f"{team}/root"
        stored = upload(take_snapshot(project), t, mine.workdir)
        assert (Path(stored.path) / "train.py").read_text() == "print('mine')\n"
        shutil.rmtree(team / "root")
        plant(f"mkdir {team}/root && chmod 777 {team}/root")  # made first by another member, under my name
        with pytest.raises(UsageError) as planted:
            survey(t, str(team), [], None, None, shared=True)
        assert f"{team}/root is owned by uid 65534" in one_line(planted)
    finally:
        sshd.close_master()


def test_shared_workdir_is_true_or_false() -> None:
    assert parse_profiles("a: {host: h, workdir: /t, shared_workdir: true}\n", "c.yaml")["a"].shared_workdir
    with pytest.raises(SpecError, match="shared_workdir: must be true or false"):
        parse_profiles("a: {host: h, workdir: /t, shared_workdir: yes please}\n", "c.yaml")


def test_a_run_record_in_a_log_directory_another_user_made_is_not_believed(scratch: Path, tmp_path: Path) -> None:
    """The run's own record answers for a job Slurm forgot: a forged one says nothing."""
    if shutil.which("squeue") is None:
        pytest.skip("needs Slurm's client commands on the PATH (the status script asks squeue first)")
    line = '{"event": "run-end", "exit_code": 0, "run": 1}\n'
    plant(
        f"mkdir -p {scratch}/train-99999/history && printf '{line}' > {scratch}/train-99999/history/batch-shell.jsonl"
    )
    own = tmp_path / "train-99999" / "history"
    own.mkdir(parents=True)
    (own / "batch-shell.jsonl").write_text(line)
    t = LocalTransport("alpha")
    forged = remote_states(t, ["99999"], {"99999": str(scratch / "train-99999")})["99999"]
    mine = remote_states(t, ["99999"], {"99999": str(tmp_path / "train-99999")})["99999"]
    assert (forged.state, forged.source) == ("UNKNOWN", "none")
    assert (mine.state, mine.source, mine.exit_code) == ("COMPLETED", "record", 0)
