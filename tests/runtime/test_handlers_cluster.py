"""Each preemption handler, the rank logs and the first failure's exit code on a real 3-node Slurm: rendered
scripts, real sbatch, scancel and scontrol, real slurmstepd signals. The same scenarios run locally in
tests/local/test_local_handlers.py. What they check does not differ between versions (scancel --signal and
scontrol requeue by hand, no scheduler preemption), so they run once, on the last selected version
(slurm_versions.ANY), beside the primary version's longer list."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import SlurmCluster
from slurm_versions import ANY

from slurmgen.script.render import render
from slurmgen.spec.load import load_text

from .cluster_jobs import PY, ROOT, job_history, read_log, scancel

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_versions(ANY)]

OWN = ROOT / "tests" / "runtime" / "own_checkpoint.py"
PROGRAMS = ROOT / "tests" / "task_program.py"


def submit_spec(cluster: SlurmCluster, tmp: Path, name: str, command: list[str], preemption: str) -> str:
    text = (
        f"name: {name}\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 2\ncpus_per_task: 1\n"
        f"python: {PY}\noutput: {tmp}/logs\ndistributed: {{backend: gloo, timeout: 60, barrier_timeout: 30}}\n"
        f"preemption: {preemption}\n"
    )
    script = tmp / "job.sbatch"
    script.write_text(render(load_text(text, "test.yaml").spec))
    (tmp / "logs").mkdir(exist_ok=True)
    return str(cluster.submit(script))


def wait_text(tmp: Path, name: str, job: str, file: str, pattern: str, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while not re.search(pattern, text := read_log(tmp, name, job, file)):
        assert time.monotonic() < deadline, f"{pattern!r} never appeared in {file}:\n{text[-3000:]}"
        time.sleep(0.2)
    return text


def own_command(tmp: Path, *extra: str, steps: int = 160) -> list[str]:
    return [PY, str(OWN), "--steps", str(steps), "--step-time", "0.05", "--save-every", "20",
            "--snapshot", str(tmp / "snap.pt"), *extra]  # fmt: skip


def check_resume(tmp: Path, name: str, job: str, steps: int = 160) -> None:
    rank0 = read_log(tmp, name, job, "rank-0.log")
    last_saved = re.findall(r"SAVED (\d+) (\S+)", rank0[: rank0.index("RESUMED")])[-1]
    for rank in range(4):
        text = read_log(tmp, name, job, f"rank-{rank}.log")
        assert re.findall(r"RESUMED (\d+) (\S+)", text) == [last_saved], (rank, text[-2000:])
        assert re.search(rf"DONE {steps} \S+ rank=\d", text), text[-2000:]


@pytest.mark.torch
@pytest.mark.parametrize("handler", ["requeue", "auto"])
def test_an_unmodified_program_is_stopped_gracefully_requeued_and_resumes_from_its_own_checkpoint(
    slurm_cluster: SlurmCluster, tmp_path: Path, handler: str
) -> None:
    name = f"own-{handler}"
    steps = 600  # 30 s of steps: auto gives the program 15 s (a quarter of the lead time) to construct Preemption
    command = own_command(tmp_path, steps=steps)
    job = submit_spec(slurm_cluster, tmp_path, name, command, f"{{handler: {handler}, lead_time: 60}}")
    wait_text(tmp_path, name, job, "rank-0.log", r"SAVED 40 ")
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)  # as --signal=B: delivers it
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=240)
    batch = read_log(tmp_path, name, job, "batch")
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), batch[-3000:]
    run1 = batch[: batch.index("run 2,")]
    assert "SIGUSR1 (requested): stopping the step with SIGTERM; the job is requeued once it has ended" in run1
    assert "forcing job termination" not in run1  # a graceful stop: srun was never sent SIGTERM
    assert f"requeue issued for job {job} (requested; requeue 1 of 5)" in run1
    warning = "warning: the program did not construct slurmgen's Preemption within 15 s of SIGUSR1, so SIGUSR1 cannot"
    assert batch.count(warning) == (1 if handler == "auto" else 0)
    check_resume(tmp_path, name, job, steps)
    runs = job_history(tmp_path, name, job)
    assert [(r.cause, r.requeued_by) for r in runs] == [("requested", "batch-shell"), (None, None)]


@pytest.mark.torch
def test_a_program_that_handles_the_signal_itself_gets_an_early_one_once_its_handler_exists(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    name = "own-program"
    command = own_command(tmp_path, "--handle", "USR1", "--handler-at", "100")
    job = submit_spec(slurm_cluster, tmp_path, name, command, "{handler: program}")
    wait_text(tmp_path, name, job, "rank-0.log", r"SAVED 20 ")
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=240)
    batch = read_log(tmp_path, name, job, "batch")
    assert (info.state.name, info.restarts) == ("COMPLETED", 1), batch[-3000:]
    for rank in range(4):
        text = read_log(tmp_path, name, job, f"rank-{rank}.log")
        early = text.index("slurmgen: SIGUSR1 came before the program installed a handler for it")
        assert early < text.index("slurmgen: SIGUSR1 sent to the program, whose handler is now installed"), text
    rank0 = read_log(tmp_path, name, job, "rank-0.log")
    assert rank0.index("HANDLER USR1") < rank0.index("STOP ")
    check_resume(tmp_path, name, job)
    assert "requeue issued" not in batch  # the program requeued itself; slurmgen did not
    assert [r.requeued_by for r in job_history(tmp_path, name, job)] == ["slurm", None]


@pytest.mark.torch
def test_runtime_forwards_the_signal_to_preemption(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    name = "own-runtime"
    command = [PY, str(ROOT / "jobs" / "train_tiny.py"), "--steps", "600", "--step-time", "0.02"]
    job = submit_spec(slurm_cluster, tmp_path, name, command, "{handler: runtime}")
    wait_text(tmp_path, name, job, "rank-3.log", r"start at step 0")
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=240)
    batch = read_log(tmp_path, name, job, "batch")
    assert (info.state.name, info.restarts) == ("COMPLETED", 1), batch[-3000:]
    assert "warning" not in batch
    runs = job_history(tmp_path, name, job)
    assert [(r.cause, r.requeued_by) for r in runs] == [("requested", "rank0"), (None, None)]
    rank0 = read_log(tmp_path, name, job, "rank-0.log")
    stopped = re.search(r"stopping after step (\d+), weights (\S+)", rank0)
    resumed = re.search(r"resumed weights (\S+) at step (\d+)", rank0)
    assert stopped and resumed and (resumed[2], resumed[1]) == (stopped[1], stopped[2]), rank0[-3000:]


def test_every_line_arrives_whole_in_its_ranks_log_and_live(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    name = "lines"
    go = tmp_path / "go"
    job = submit_spec(slurm_cluster, tmp_path, name, [PY, str(PROGRAMS), "lines", "20000", "60", str(go)], "false")
    for rank in range(4):
        wait_text(tmp_path, name, job, f"rank-{rank}.log", rf"READY rank={rank}\n")  # live, while it waits
    go.touch()
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=240)
    assert (info.state.name, info.exit_code) == ("COMPLETED", 0), read_log(tmp_path, name, job, "batch")
    tail = "x" * 60
    for rank in range(4):
        lines = read_log(tmp_path, name, job, f"rank-{rank}.log").splitlines()
        assert lines[0] == f"READY rank={rank}" and lines[-1] == f"LINES DONE rank={rank}"
        body = lines[1:-1]
        bad = [line for i, line in enumerate(body) if line != f"rank={rank} line={i} {tail}"]
        assert len(body) == 20000 and not bad, (len(body), bad[:3])
    for node in ("node1", "node2", "node3"):
        assert "line=" not in read_log(tmp_path, name, job, f"{node}.log")


def test_the_job_exits_with_the_first_failing_tasks_own_code(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """Measured before: task 1 exiting 3 made the job ExitCode=143:0 (a sibling's SIGTERM). Now 3, named."""
    name = "fails"
    job = submit_spec(slurm_cluster, tmp_path, name, [PY, str(PROGRAMS), "fail", "1", "3"], "false")
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=180)
    batch = read_log(tmp_path, name, job, "batch")
    assert (info.state.name, info.exit_code) == ("FAILED", 3), batch
    node = re.search(r"srun: error: (\S+): task 1: Exited with exit code 3", batch)
    assert node, batch
    assert f"rank 1 on {node[1]} failed first: its program exited with code 3; the job exits 3" in batch
    log = tmp_path / "logs" / f"{name}-{job}" / "rank-1.log"
    assert f"its log: {log}; last lines:\nslurmgen: | STARTED rank=1\nslurmgen: | ValueError: boom at rank 1" in batch
    (run,) = job_history(tmp_path, name, job)
    assert (run.exit_code, run.failing) == (3, f"rank 1 on {node[1]} (exit 3)")
