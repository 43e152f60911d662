"""A sweep's arrays through the once-only remote submit call, run by a real bash (the transport of a profile without
host) in front of stand-in Slurm commands that record what they were asked: the split at the MaxArraySize that
`scontrol show config` reports, each array's options, the journal's record (cluster, profile, offsets, the local
copy of the points) that status and logs read back, and an answer that a dropped connection asks for again.
The same path against the real cluster through sshd: test_remote_sweep_cluster.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slurmgen.backends.registry import sweep_handle
from slurmgen.backends.slurm_ssh.once import once_script
from slurmgen.backends.slurm_ssh.sweep import RemoteSweep
from slurmgen.backends.slurm_ssh.sweep_arrays import send_sweep_remote
from slurmgen.errors import UsageError
from slurmgen.journal import Entry, Journal
from slurmgen.remote.transport import LocalTransport
from slurmgen.script.build import build_file
from slurmgen.slurm.ids import JobId
from slurmgen.submission.sweep_record import load_record, sweep_id_of

SPEC = """name: swp
command: [python3, train.py]
env: {LR: "{lr}"}
time: "5:00"
preemption: false
sweep:
  points: [{lr: 0.1}, {lr: 0.2}, {lr: 0.3}]
"""


def stand_ins(folder: Path, squeue: str = "") -> Path:
    """scontrol (MaxArraySize 2), squeue (``squeue``'s lines) and sbatch (records its options, answers 41, 42, ...)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    scripts = {
        "scontrol": "echo 'KillWait                = 30 sec'\necho 'MaxArraySize            = 2'",
        "squeue": f"printf '%b' {squeue!r}",
        "sbatch": f'echo "$*" >> {folder}/sbatch.log\necho "$((40 + $(wc -l < {folder}/sbatch.log)));cl"',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_a_remote_sweep_is_split_at_max_array_size_and_recorded_with_its_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{stand_ins(tmp_path)}:{Path('/usr/bin')}:{Path('/bin')}")
    (tmp_path / "job.yaml").write_text(SPEC)
    (tmp_path / "clusters.yaml").write_text(f"alpha:\n  host: alpha-login\n  workdir: {tmp_path / 'work'}\n")
    code, logs, run_dir = tmp_path / "code", tmp_path / "work" / "logs", str(tmp_path / "work" / "runs" / "swp" / "t1")
    built = build_file(tmp_path / "job.yaml", [f'chdir="{code}"', f'output="{logs}"'], None, tmp_path)
    journal = Journal(tmp_path / "journal")
    token = "t1"  # noqa: S105 - a submission token (its arrays': t1-a0, t1-a1), not a password
    base = Entry(event="submitting", token=token, name="swp", spec=str(tmp_path / "job.yaml"), run_dir=run_dir,
                 script="job.sbatch", time=1.0, cluster="alpha", log_dir=str(logs),
                 extra={"profile": "alpha", "snapshot": "abc", "code_dir": str(code)})  # fmt: skip

    sweep_id, arrays = send_sweep_remote(LocalTransport("alpha"), built.spec, built.script, str(code), run_dir,
                                           "/shipped", base, tmp_path / "job.yaml", (), journal, lambda: 2.0,
                                           print)  # fmt: skip

    assert (sweep_id, arrays) == ("swp-t1", ("41", "42"))  # points 0-1, then point 2 (task 0, offset 2)
    asked = (tmp_path / "sbatch.log").read_text().splitlines()
    assert "--array=0-1 --export=ALL,SLURMGEN_SWEEP_ID=swp-t1,SLURMGEN_SWEEP_OFFSET=0 job.sbatch" in asked[0]
    assert "--array=0 --export=ALL,SLURMGEN_SWEEP_ID=swp-t1,SLURMGEN_SWEEP_OFFSET=2 job.sbatch" in asked[1]
    assert "--comment=slurmgen:t1-a0 " in asked[0] and "--comment=slurmgen:t1-a1 " in asked[1]
    # sbatch's answer kept whole (`41;cl`: a multi-cluster site's), its cluster in the journal's entries
    assert (Path(run_dir) / "jobid-a0").read_text() == "41;cl\n" and (Path(run_dir) / "job.sbatch").exists()

    jobs = journal.jobs()
    submitted = [e for e in jobs if e.event == "submitted"]
    assert [(e.job_id, e.token, e.cluster, e.extra["profile"], e.extra["offset"], e.extra["tasks"], e.run_dir)
            for e in submitted] == [("41", "t1-a0", "alpha", "alpha", 0, "0-1", run_dir),
                                    ("42", "t1-a1", "alpha", "alpha", 2, "0", run_dir)]  # fmt: skip
    assert [e.extra["slurm_cluster"] for e in submitted] == ["cl", "cl"]
    # the points are read back from the copy here, not from the run directory on the cluster
    assert sweep_id_of("41_1", jobs) == sweep_id_of("42", jobs) == "swp-t1"
    record = load_record(sweep_id, jobs)
    assert Path(str(record.first.extra["copy"])).is_relative_to(tmp_path / "journal" / "remote" / "alpha")
    assert [record.point_of(i) for i in range(3)] == [JobId(41, array_task=0), JobId(41, array_task=1),
                                                      JobId(42, array_task=0)]  # fmt: skip
    assert record.sweep.values(2) == {"lr": 0.3}
    monkeypatch.setenv("SLURMGEN_HOME", str(tmp_path / "journal"))
    handle = sweep_handle(record)  # the profile has a host: Slurm's commands go through its connection
    assert isinstance(handle, RemoteSweep) and handle.profile.host == "alpha-login"
    assert handle.point(2).label == "cl:42_0"  # a remote job of cluster cl: its logs come through the connection
    with pytest.raises(UsageError, match=r"runs on cluster alpha: resubmitting its points over ssh is not supported"):
        handle.resubmit([0], print)  # said in one line before anything is asked of the cluster


def test_the_submit_call_answers_an_array_found_by_its_token_and_then_its_own_file(tmp_path: Path) -> None:
    """A dropped connection after sbatch: the call made again finds the array by its token in squeue (whose %i is
    a task or a pending range, 77_[0-1]) and keeps that id; a third call answers from the file, asking nothing."""
    bin_dir = stand_ins(tmp_path, "77_[0-1] slurmgen:t9-a0\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    run_dir = tmp_path / "run"
    command = once_script(str(run_dir), str(tmp_path / "logs"), "/shipped", None, "t9-a0", ("--array=0-1",),
                            jobid="jobid-a0")  # fmt: skip
    for _ in range(2):
        got = subprocess.run(["bash", "-c", command], input=b"#!/bin/bash\n", capture_output=True, env=env, check=False)
        assert (got.returncode, got.stdout) == (0, b"77\n"), got.stderr
    assert not (tmp_path / "sbatch.log").exists()  # never submitted again
    assert (run_dir / "jobid-a0").read_text() == "77\n"


def test_the_submit_call_creates_the_error_logs_directory_beside_the_outputs(tmp_path: Path) -> None:
    """On the cluster, as on this machine: Slurm creates neither log directory, so the one remote call does."""
    env = {"PATH": f"{stand_ins(tmp_path)}:/usr/bin:/bin"}
    logs, errs = tmp_path / "runs" / "logs", tmp_path / "runs" / "err s"
    command = once_script(str(tmp_path / "run"), str(logs), "/shipped", None, "t1", error_dir=str(errs))
    got = subprocess.run(["bash", "-c", command], input=b"#!/bin/bash\n", capture_output=True, env=env, check=False)
    assert got.returncode == 0, got.stderr
    assert logs.is_dir() and errs.is_dir()


def test_a_remote_jobs_error_log_goes_beside_its_output_under_the_workdir_not_into_the_snapshot(tmp_path: Path) -> None:
    from slurmgen.backends.slurm_ssh.placing import remote_overrides
    from slurmgen.spec.load import load_text

    plain = 'name: tiny\ncommand: [python3, train.py]\ntime: "5:00"\noutput: logs\n'
    spec = load_text(plain + "error: errs\n", "job.yaml").spec
    assert remote_overrides(spec, "/w", "/w/snapshots/abc") == [
        'chdir="/w/snapshots/abc"',
        'output="/w/runs/tiny/logs"',
        'error="/w/runs/tiny/errs"',
    ]
    absolute = load_text(plain + "error: /scratch/errs\n", "job.yaml").spec
    assert remote_overrides(absolute, "/w", None) == ['output="/w/runs/tiny/logs"']
