"""One node's checks (slurmgen.batch.node_check) with real processes, a real full tmpfs and PATH wrappers for
nvidia-smi; and Slurm's node states as the batch shell reads them (batch/nodes.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmgen import run_history
from slurmgen.batch import node_check
from slurmgen.batch import nodes as batch_nodes
from slurmgen.job_context.context import JobContext


def tool(where: Path, name: str, body: str) -> None:
    path = where / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def env_with(bin_dir: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURMD_NODENAME": "n7", **extra}


def test_a_healthy_node_passes_and_says_so_in_one_json_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slurmgen.batch.node_check", "--gpus=0", f"--state-dir={tmp_path}", "--need=10",
         "--timeout=5", "--", "true"],
        capture_output=True, text=True, env={**os.environ, "SLURMD_NODENAME": "n7"}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"node": "n7", "ok": True, "reason": ""}
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


def test_a_failing_health_check_names_its_exit_code_and_last_line(tmp_path: Path) -> None:
    got = node_check.verdict(
        JobContext.from_environ({"SLURMD_NODENAME": "n7"}), 0, "", 0, 5, ["sh", "-c", "echo 'ECC errors: 12'; exit 3"]
    )
    assert got == {"node": "n7", "ok": False, "reason": "health check failed (exit 3: ECC errors: 12)"}


def test_a_hung_health_check_fails_the_node_on_time_and_leaves_no_process(tmp_path: Path) -> None:
    marker = tmp_path / "child-pid"
    started = time.monotonic()
    got = node_check.verdict(
        JobContext.from_environ({"SLURMD_NODENAME": "n7"}),
        0,
        "",
        0,
        1.0,
        ["sh", "-c", f"sleep 60 & echo $! >{marker}; wait"],
    )
    assert time.monotonic() - started < 10
    assert got["ok"] is False and got["reason"] == "health check did not finish within 1 s"
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not running(child)  # its whole session was killed, the background sleep too


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for its (re)parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_missing_health_check_program_fails_the_node() -> None:
    got = node_check.verdict(
        JobContext.from_environ({"SLURMD_NODENAME": "n7"}), 0, "", 0, 5, ["/nonexistent/check-node"]
    )
    assert got["ok"] is False and "cannot start" in str(got["reason"])


def test_a_state_directory_without_room_for_the_last_checkpoint_fails_the_node(small_tmpfs: Path) -> None:
    ok = node_check.verdict(JobContext.from_environ({"SLURMD_NODENAME": "n7"}), 0, str(small_tmpfs), 512 * 1024, 5, [])
    assert ok["ok"] is True
    full = node_check.verdict(
        JobContext.from_environ({"SLURMD_NODENAME": "n7"}), 0, str(small_tmpfs), 4 * 1024 * 1024, 5, []
    )
    assert full["ok"] is False
    assert "KiB free, the newest checkpoint needs 4096 KiB" in str(full["reason"]), full


def test_a_state_directory_that_cannot_be_written_fails_the_node(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("x")
    got = node_check.verdict(JobContext.from_environ({"SLURMD_NODENAME": "n7"}), 0, str(blocked / "state"), 0, 5, [])
    assert got["ok"] is False and "is not writable" in str(got["reason"]), got


def test_gpus_are_counted_by_nvidia_smi_within_what_slurm_gave(tmp_path: Path) -> None:
    tool(tmp_path, "nvidia-smi", 'echo "GPU 0: H100 (UUID: GPU-a)"; echo "GPU 1: H100 (UUID: GPU-b)"')
    assert node_check.gpu_problem(2, env_with(tmp_path, CUDA_VISIBLE_DEVICES="0,1"), 5) is None
    # Slurm gave two, the driver reaches one (the other fell off the bus): the node is bad.
    tool(tmp_path, "nvidia-smi", 'echo "GPU 0: H100 (UUID: GPU-a)"')
    problem = node_check.gpu_problem(2, env_with(tmp_path, CUDA_VISIBLE_DEVICES="0,1"), 5)
    assert problem == "1 GPU(s) visible (nvidia-smi -L), 2 wanted (gpus_per_node)"


def test_a_hung_or_failing_nvidia_smi_fails_the_node(tmp_path: Path) -> None:
    tool(tmp_path, "nvidia-smi", "exec sleep 60")
    started = time.monotonic()
    assert node_check.gpu_problem(1, env_with(tmp_path), 1.0) == "nvidia-smi -L did not answer within 1 s"
    assert time.monotonic() - started < 10
    tool(tmp_path, "nvidia-smi", 'echo "NVIDIA-SMI has failed because it could not communicate" >&2; exit 9')
    problem = node_check.gpu_problem(1, env_with(tmp_path), 5)
    assert problem == "nvidia-smi -L failed (exit 9: NVIDIA-SMI has failed because it could not communicate)"


def test_without_nvidia_smi_the_gpus_slurm_gave_are_counted(tmp_path: Path) -> None:
    assert node_check.gpu_problem(2, env_with(tmp_path, CUDA_VISIBLE_DEVICES="0,1"), 5) is None
    problem = node_check.gpu_problem(2, env_with(tmp_path, CUDA_VISIBLE_DEVICES="0"), 5)
    assert problem == "1 GPU(s) visible (CUDA_VISIBLE_DEVICES; no nvidia-smi), 2 wanted (gpus_per_node)"
    assert node_check.gpu_problem(0, env_with(tmp_path), 5) is None  # a CPU job: nothing to count


SHOW_NODE = (
    "NodeName=node1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1\n"
    "NodeName=node2 Arch=x86_64 CoresPerSocket=1 State=DOWN* ThreadsPerCore=1 Reason=Not responding\n"
    "NodeName=node3 Arch=x86_64 CoresPerSocket=1 State=MIXED+DRAIN ThreadsPerCore=1 Reason=bad\n"
    "NodeName=node4 Arch=x86_64 CoresPerSocket=1 State=ALLOCATED* ThreadsPerCore=1\n"
    "NodeName=node5 Arch=x86_64 CoresPerSocket=1 State=ALLOCATED ThreadsPerCore=1\n"
)


def test_slurm_down_drain_and_not_responding_nodes_are_evidence() -> None:
    hosts = ["node1", "node2", "node3", "node4", "node5"]
    got = batch_nodes.down_nodes(hosts, run=lambda argv: SHOW_NODE)
    assert got == {
        "node2": "Slurm shows it DOWN*",
        "node3": "Slurm shows it MIXED+DRAIN",
        "node4": "Slurm shows it ALLOCATED*",
    }
    assert batch_nodes.down_nodes(hosts, run=lambda argv: "") == {}  # Slurm not answering: no evidence


def fake_srun(where: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `srun` first on PATH that answers the check step as ``body`` says (argv in "$@")."""
    tool(where, "srun", body)
    monkeypatch.setenv("PATH", f"{where}:{os.environ['PATH']}")


def test_a_node_that_gives_no_verdict_while_others_do_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    verdict = json.dumps({"node": "n1", "ok": True, "reason": ""})
    fake_srun(tmp_path, f"echo '{verdict}'; exec sleep 60", monkeypatch)
    monkeypatch.setattr(batch_nodes, "STEP_START", 0.5)
    started = time.monotonic()
    failed, answered = batch_nodes.check_step(["n1", "n2"], 0, JobContext.from_environ({}), 0, 0.2)
    assert answered and failed == {"n2": "no verdict from the node check within 1.1 s"}
    assert time.monotonic() - started < 15


def test_a_check_step_that_gives_no_verdict_at_all_blames_no_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_srun(tmp_path, "echo 'srun: error: Unable to create step for job 7: Invalid generic resource' >&2; exit 1",
              monkeypatch)  # fmt: skip
    assert batch_nodes.check_step(["n1", "n2"], 1, JobContext.from_environ({}), 0, 5) == ({}, False)
    assert "gave no verdict (srun: error: Unable to create step for job 7: Invalid generic resource): no node is " \
           "blamed" in capsys.readouterr().err  # fmt: skip


def test_the_check_step_runs_once_on_every_node_with_the_health_check_as_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_srun(tmp_path, f'printf "%s\\n" "$@" >{tmp_path}/argv; echo \'{{"node": "n1", "ok": false, "reason": "x"}}\'',
              monkeypatch)  # fmt: skip
    env = {"SLURMGEN_HEALTH_CHECK": "check-node --min-free '10 G'", "SLURMGEN_STATE_DIR": "/s"}
    failed, _ = batch_nodes.check_step(["n1"], 2, JobContext.from_environ(env), 123, 5)
    assert failed == {"n1": "x"}
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:5] == ["--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--nodelist=n1", "--kill-on-bad-exit=0"]
    assert "--gpus-per-node=2" in argv and "--need=123" in argv and "--state-dir=/s" in argv
    assert argv[-4:] == ["--", "check-node", "--min-free", "10 G"]


def test_the_room_needed_is_the_newest_complete_checkpoints_size(tmp_path: Path) -> None:
    from slurmgen.runtime.checkpoint import layout

    env = {"SLURM_JOB_ID": "42", "SLURMGEN_STATE_DIR": str(tmp_path)}
    assert batch_nodes.checkpoint_bytes(JobContext.from_environ(env), run_history.History([])) == 0
    assert (
        batch_nodes.checkpoint_bytes(
            JobContext.from_environ(env), run_history.History([{"event": "save", "bytes": 77}])
        )
        == 77
    )  # the program's own path
    plain = tmp_path / "42.state"
    plain.write_bytes(b"x" * 5000)
    os.utime(plain, (1, 1))
    assert batch_nodes.checkpoint_bytes(JobContext.from_environ(env), run_history.History([])) == 5000
    sharded = tmp_path / layout.complete_name("42.state", 3)
    sharded.mkdir()
    (sharded / "shard-0").write_bytes(b"y" * 3000)
    (sharded / "shard-1").write_bytes(b"y" * 3000)
    (sharded / layout.MARKER).write_text("{}")
    assert (
        batch_nodes.checkpoint_bytes(JobContext.from_environ(env), run_history.History([])) == 6002
    )  # newer than the plain state: its files
    incomplete = tmp_path / layout.complete_name("42.state", 4)
    incomplete.mkdir()
    (incomplete / "shard-0").write_bytes(b"z" * 99999)  # no MARKER: not complete, not counted
    assert batch_nodes.checkpoint_bytes(JobContext.from_environ(env), run_history.History([])) == 6002
