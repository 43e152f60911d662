"""Another user's attacks, as a second local user (uid 65534, through `setpriv`) would make them: files and links
planted where slurmgen writes and reads, in a shared directory. Each test is an attack that worked before the
trust rule (slurmgen/trust.py); the victim is the user running the tests (root, so that it can become uid 65534)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from slurmgen import contract, run_history, trust
from slurmgen.batch.commands import _take_marker
from slurmgen.job_context.context import JobContext
from slurmgen.journal import Entry, find_home
from slurmgen.local import setup
from slurmgen.local.array import task_job_ids
from slurmgen.progress_mark import ProgressMark, clear_node_dir, progress_path
from slurmgen.spec.load import load_file

NOBODY = 65534


def _why_not_root() -> str | None:
    if os.geteuid() != 0:
        return "planting files as another user (uid 65534) needs root (setpriv --reuid); CI runs these as root"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux) to act as another user"
    return None


def as_nobody(script: str, cwd: Path) -> None:
    """Run shell `script` as uid/gid 65534: the other user of the cluster."""
    argv = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", "sh", "-ec", script]
    subprocess.run(argv, cwd=cwd, check=True, env={"PATH": "/usr/bin:/bin", "HOME": "/"})


@pytest.fixture
def shared() -> Iterator[Path]:
    """A world-writable sticky directory (a /tmp or scratch root) that uid 65534 can reach."""
    why = _why_not_root()
    if why:
        pytest.skip(why)
    top = Path(tempfile.mkdtemp(prefix="slurmgen-shared-"))
    top.chmod(0o755)
    place = top / "scratch"
    place.mkdir()
    place.chmod(0o1777)
    try:
        yield place
    finally:
        shutil.rmtree(top)


def victim_file(shared: Path) -> Path:
    """A file of the victim's that the attacker wants changed (outside anything slurmgen writes)."""
    target = shared.parent / "victim-precious"
    target.write_text("precious\n")
    target.chmod(0o600)
    return target


# --- 1: another user's .slurmgen in a parent directory --------------------------------------------------------


@pytest.mark.parametrize("parent_owner", ["root, sticky", "the other user"])
def test_another_users_journal_in_a_parent_is_neither_listed_nor_resumed(shared: Path, parent_owner: str) -> None:
    if parent_owner == "the other user":
        os.chown(shared, NOBODY, NOBODY)
    proof = shared.parent / "code-ran"
    forged = Entry(
        event="local", token="t",  # noqa: S106 - a journal token, no password
        name="evil", spec=str(shared / "evil.yaml"), run_dir=str(shared / "ctl"),
        script=str(shared / "ctl" / "job.sbatch"), time=time.time(), job_id="1",
        extra={"state": "COMPLETED", "runs": 1, "exit_code": 0},
    )  # fmt: skip
    as_nobody(
        "mkdir -p .slurmgen/local ctl && chmod -R 777 .slurmgen ctl\n"
        f"printf '%s\\n' '{forged.to_json()}' > .slurmgen/local/journal.jsonl\n"
        f"printf '#!/bin/sh\\ntouch {proof}\\n' > ctl/job.sbatch && chmod 777 ctl/job.sbatch\n"
        "printf 'name: evil\\ncommand: [true]\\n' > evil.yaml",
        shared,
    )
    mine = shared / "victim"
    mine.mkdir()
    assert find_home({}, mine) == mine / ".slurmgen"  # the search stops: never the other user's
    status = run_slurmgen("status", cwd=mine, timeout=60)
    assert "evil" not in status.stdout + status.stderr
    resume = run_slurmgen("resume", "local-1", cwd=mine, timeout=60)
    assert resume.returncode != 0 and not proof.exists(), resume.stderr
    assert len(resume.stderr.strip().splitlines()) == 1, resume.stderr


def test_a_journal_another_user_can_write_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / ".slurmgen"
    home.mkdir()
    (home / "journal.jsonl").write_text("")
    (home / "journal.jsonl").chmod(0o666)
    status = run_slurmgen("status", cwd=tmp_path, timeout=60)
    assert status.returncode != 0
    (line,) = status.stderr.strip().splitlines()
    assert "journal.jsonl is writable by group or others (mode 666)" in line and "chmod go-w" in line


# --- 2: links planted in a shared output directory -------------------------------------------------------------


def test_planted_links_in_a_log_directory_are_never_written_through(shared: Path) -> None:
    target = victim_file(shared)
    log_dir = shared / "logs"
    log_dir.mkdir()
    log_dir.chmod(0o777)  # a group directory: the attacker got links in before the victim's job wrote there
    for sub in ("progress", "history"):
        (log_dir / sub).mkdir(mode=0o777)
        (log_dir / sub).chmod(0o777)
    as_nobody(
        f"ln -s {target} logs/progress/rank-0\nln -s {target} logs/history/batch.jsonl\n"
        f"ln -s {shared.parent}/created-by-victim logs/rank-0.log",
        shared,
    )
    job = JobContext.from_environ({contract.LOG_DIR: str(log_dir), contract.HANG_TIMEOUT: "60"})
    try:
        ProgressMark(job, 0).touch(5)  # was: the victim file truncated to "5"
    finally:
        clear_node_dir(job)  # its node mark's directory in /dev/shm: no task of a step leaves it here
    with pytest.raises(trust.Untrusted, match="is a symbolic link"):
        run_history.append(str(log_dir), "batch", run_history.RUN_START, 1, time.time())  # was: a line appended
    with pytest.raises(trust.Untrusted, match="is a symbolic link"):
        trust.open_write(str(log_dir / "rank-0.log"))  # was: a dangling link made a victim-owned file there
    assert target.read_text() == "precious\n"
    assert not (shared.parent / "created-by-victim").exists()
    assert progress_path(str(log_dir), 0) == str(log_dir / "progress" / "rank-0")


def test_another_users_file_in_the_history_is_not_believed(shared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dir = shared / "logs"
    (log_dir / "history").mkdir(parents=True)
    (log_dir / "history").chmod(0o1777)
    event = {"v": 1, "event": "requeue", "run": 1, "time": 1.0, "by": "batch", "cause": "preemption"}
    as_nobody(f"printf '%s\\n' '{json.dumps(event)}' > logs/history/forged.jsonl", shared)
    assert run_history.read(str(log_dir)) == []
    assert "forged.jsonl is owned by uid 65534" in capsys.readouterr().err


def test_a_symlinked_id_ledger_gets_no_line(shared: Path, tmp_path: Path) -> None:
    target = victim_file(shared)
    state = shared / "state"
    state.mkdir()
    state.chmod(0o1777)  # a shared state directory (two checkouts, one state_dir)
    as_nobody(f"ln -s {target} state/{setup.STATE_LEDGER}", shared)
    spec = load_file(write(tmp_path / "a.yaml", QUICK.replace("STATE", str(state)))).spec
    home = tmp_path / "a" / ".slurmgen"
    with pytest.raises(trust.Untrusted, match="is a symbolic link"):
        setup.new_job_id(home, lambda job_id: False, setup.state_claim(spec, home, tmp_path / "a"))
    assert target.read_text() == "precious\n"


def test_a_task_log_directory_the_other_user_made_first_stops_the_job(shared: Path) -> None:
    """The log directory of a job another user created first (with their links in it) is refused by the script
    before anything is written there; it was: the history, the rank logs and the marks written through the links."""
    target = victim_file(shared)
    work = shared / "work"
    work.mkdir()
    write(work / "q.yaml", "name: q\ncommand: [python3, -c, 'print(1)']\noutput: logs\ntime: '00:10:00'\n"
          "preemption: false\narray: 0-1\n")  # fmt: skip
    (work / "logs").mkdir()
    (work / "logs").chmod(0o1777)
    as_nobody(f"for n in $(seq 1 40); do d=logs/q-${{n}}_0; mkdir $d; ln -s {target} $d/rank-0.log; chmod 777 $d; done",
              work)  # fmt: skip
    done = run_slurmgen("run", "q.yaml", cwd=work, timeout=120)
    assert done.returncode != 0, done.stdout + done.stderr
    (log,) = (work / "logs").glob("q-*_0.log")
    assert f"logs/{log.stem} is not this user's own directory" in log.read_text()
    assert target.read_text() == "precious\n"


# --- 3: arrays and sweeps claim their ids --------------------------------------------------------------------


def test_array_tasks_of_two_directories_sharing_a_state_dir_get_different_ids(tmp_path: Path) -> None:
    spec = load_file(write(tmp_path / "a.yaml", QUICK.replace("STATE", str(tmp_path / "shared-state")))).spec
    a = task_job_ids(spec, 2, tmp_path / "a" / ".slurmgen", tmp_path / "a")
    b = task_job_ids(spec, 2, tmp_path / "b" / ".slurmgen", tmp_path / "b")
    assert len(a) == len(b) == 2 and set(a).isdisjoint(b)  # was: the same ids, so b's task resumed a's state


# --- 4: files planted in a shared state directory -------------------------------------------------------------


def test_a_foreign_requeue_marker_does_not_requeue(shared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = shared / "state"
    as_nobody(f"mkdir state && chmod 1777 state && echo preemption > state/{contract.requeue_marker_name('7')}",
              shared)  # fmt: skip
    ctx = JobContext.from_environ({contract.STATE_DIR: str(state), "SLURM_JOB_ID": "7"})
    assert _take_marker(ctx) is None  # was: "preemption", and a finished job ran twice
    assert "is owned by uid 65534" in capsys.readouterr().err


@pytest.mark.torch
def test_a_dangling_state_link_is_ignored_not_a_traceback(shared: Path, torch_module: object) -> None:
    from runtime.checkpoint.test_checkpoint_store import make_store

    state = shared / "state"
    as_nobody(f"mkdir state && chmod 1777 state && ln -s {shared.parent}/nothing state/77.state", shared)
    store = make_store(state)
    assert store.load() is None  # was: CheckpointError "no resume state could be read", the job failed at start
    store.save({"x": 1}, "periodic", async_=False, sharded=False)
    assert not (state / "77.state").is_symlink() and not (shared.parent / "nothing").exists()


# --- 5: a malicious checkpoint the victim copied -------------------------------------------------------------


class Payload:
    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self) -> tuple[object, ...]:
        return (open, (str(self.proof), "w"))


@pytest.mark.torch
def test_a_copied_malicious_checkpoint_never_runs_code(tmp_path: Path, torch_module: object) -> None:
    """`cp -r` of a colleague's checkpoint makes every file the victim's, mode 644: ownership no longer helps."""
    from runtime.checkpoint.test_checkpoint_load_faults import plant
    from runtime.checkpoint.test_checkpoint_store import make_store

    from slurmgen.runtime.checkpoint.commit import CheckpointError

    proof = tmp_path / "code-ran"
    planted = plant(tmp_path, 1, proof, os.geteuid(), 0o644)
    (planted / ".metadata").write_bytes(pickle.dumps(Payload(proof)))
    with pytest.raises(CheckpointError, match=r"refused io\.open: not a type of torch's checkpoint metadata"):
        make_store(tmp_path).load({"w": 0})
    assert not proof.exists()


def test_the_metadata_unpickler_refuses_a_crafted_global_and_reads_a_real_one(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch
    from torch.distributed.checkpoint import state_dict_saver

    from slurmgen.runtime.checkpoint import dcp_safe

    state = {"w": torch.ones(2, dtype=torch.bfloat16), "step": 3}
    state_dict_saver.save(state, checkpoint_id=str(tmp_path / "ck"), no_dist=True)
    metadata = dcp_safe.reader(str(tmp_path / "ck")).read_metadata()
    assert set(metadata.state_dict_metadata) == {"w", "step"}
    with pytest.raises(dcp_safe.RefusedGlobal, match=r"posix\.system"):
        dcp_safe.load_metadata(pickle.dumps(os.system))
    assert sys.modules.get("slurmgen.runtime.checkpoint.dcp_safe") is not None


QUICK = 'name: q\ncommand: ["true"]\ntime: "00:10:00"\npreemption: {state_dir: STATE}\n'


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_state_read_without_torch_never_runs_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch the state is a pickle: read by an unpickler that admits plain data only (was pickle.load)."""
    from slurmgen.errors import RuntimeSetupError
    from slurmgen.runtime import state as disk

    monkeypatch.setattr(disk, "_torch", lambda: None)
    proof = tmp_path / "code-ran"
    path = tmp_path / "7.state"
    path.write_bytes(pickle.dumps({"slurmgen": {"job": "7"}, "state": {"x": Payload(proof)}}))
    with pytest.raises(RuntimeSetupError, match=r"Unsupported global: io\.open"):
        disk.read(str(path))
    assert not proof.exists()
    path.write_bytes(pickle.dumps({"slurmgen": {"job": "7"}, "state": {"x": [1, 2.5, "t", b"b", {3}]}}))
    assert disk.read(str(path)) == {"slurmgen": {"job": "7"}, "state": {"x": [1, 2.5, "t", b"b", {3}]}}


def test_a_group_writable_directory_is_trusted_only_for_the_users_private_group(tmp_path: Path) -> None:
    """umask 002 with a private group per user makes slurmgen's own directories group-writable: still ours. A
    directory that a shared group can write is not (what a colleague in the project group could plant into)."""
    why = _why_not_root()
    if why:
        pytest.skip(why)
    import grp
    import pwd

    mine = tmp_path / "umask-002"
    mine.mkdir(mode=0o775)
    mine.chmod(0o775)
    user = pwd.getpwuid(os.geteuid()).pw_name
    private = grp.getgrnam(user).gr_gid if user in {g.gr_name for g in grp.getgrall()} else None
    if private is None:
        pytest.skip(f"no private group named {user}")
    os.chown(mine, os.geteuid(), private)
    assert trust.why_not_dir(str(mine)) is None
    os.chown(mine, os.geteuid(), NOBODY)  # a group of others (nogroup)
    assert "writable by group or others (mode 775)" in (trust.why_not_dir(str(mine)) or "")
