"""A program that saves and resumes by itself (tests/local/data/gpt_resume.py: nanoGPT's manner) on the real test
cluster, 2 nodes x 1 rank over gloo, with the spec's progress.pattern, checkpoint.path and resume.args: a crash
restarts the step inside the allocation and a preemption requeues the job, and each start after the first resumes
from the program's own checkpoint. `slurmgen submit`, real sbatch, srun, scancel and slurmstepd signals; the same
story runs under `slurmgen run` in tests/local/test_local_program_checkpoint.py. What it checks is slurmgen's own
lines and files, alike on every version, so it runs once, on the last selected version (slurm_versions.ANY)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from cli_run import run_slurmgen
from conftest import SlurmCluster
from local.test_local_program_checkpoint import near, near_seconds, seconds_since, starts
from slurm_versions import ANY

from .cluster_jobs import PY, ROOT, logs, read_log, scancel

pytestmark = [pytest.mark.slurm, pytest.mark.slurm_versions(ANY), pytest.mark.torch]

PROGRAM = ROOT / "tests" / "local" / "data" / "gpt_resume.py"
ITERS = 400
SAVED = r"saving checkpoint to \S+ at iter (\d+)"


def wait(what: object, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def submit(cluster: SlurmCluster, tmp_path: Path, *extra: str, resume: bool = True) -> str:
    """`slurmgen submit` of gpt_resume.py on 2 nodes x 1 rank, its checkpoint in tmp_path/out, handler requeue: the
    job id."""
    out = tmp_path / "out"
    command = [PY, str(PROGRAM), "--max-iters", str(ITERS), "--eval-interval", "20", "--step-time", "0.05",
               "--out-dir", str(out), *extra]  # fmt: skip
    text = (
        f"name: gpt\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 2\ntasks_per_node: 1\ncpus_per_task: 1\n"
        f"python: {PY}\noutput: {tmp_path}/logs\ndistributed: {{backend: gloo, timeout: 60, barrier_timeout: 30}}\n"
        f"preemption: {{handler: requeue, lead_time: 60}}\ncheckpoint: {{path: {out}/ckpt.pt}}\n"
        f"progress: {{pattern: '^iter (\\d+):', total: {ITERS}}}\n"
        + ("resume: {args: [--init_from=resume]}\n" if resume else "")
    )
    (tmp_path / "job.yaml").write_text(text)
    done = run_slurmgen("submit", "job.yaml", cwd=tmp_path, env=cluster.env, timeout=120)  # as a user does
    assert done.returncode == 0 and done.stdout.strip().isdigit(), done.stderr
    return done.stdout.strip()


def test_on_the_cluster_a_crash_and_a_preemption_each_resume_from_the_programs_own_checkpoint(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Rank 1 dies of SIGKILL at iteration 118 (last save at 80): the step restarts on both nodes with
    --init_from=resume and goes on from 80. After two more saves the job gets the preemption signal: Slurm
    requeues it and run 2 resumes from the last save. Every iteration is done, the last is the final one, and
    `report --json` counts the iterations lost at each stop back to the program's last save (within 10%)."""
    out = tmp_path / "out"
    job = submit(slurm_cluster, tmp_path, "--die-at", "118", "--die-once", str(tmp_path / "died"))

    def rank0() -> str:
        return read_log(tmp_path, "gpt", job, "rank-0.log")

    wait(lambda: len(starts(rank0())) == 2 and len(re.findall(SAVED, rank0())) >= 5)
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)  # the preemption signal, as --signal=B: sends it
    info = slurm_cluster.wait_for(job, lambda i: i.state.is_terminal and i.restarts >= 1, timeout=300)
    everything = logs(tmp_path, "gpt", job)
    assert (info.state.name, info.restarts, info.exit_code) == ("COMPLETED", 1, 0), everything[-4000:]
    log = rank0()
    first, second, third = starts(log)
    saves = starts(log, SAVED)
    assert saves[0] == [20, 60, 80] and len(saves[1]) >= 2, saves
    assert re.findall(r"resumed from iter (\d+)", log) == ["80", str(saves[1][-1])]
    assert second[0] == 80 and third[0] == saves[1][-1]
    assert third[-1] == ITERS and log.count(f"DONE {ITERS}") == 1
    assert sorted(set(first + second + third)) == list(range(ITERS + 1))  # nothing skipped
    assert f"slurmgen: resuming from {out}/ckpt.pt (run 1, restart 1): --init_from=resume" in everything
    assert f"slurmgen: resuming from {out}/ckpt.pt (run 2): --init_from=resume" in everything
    done = run_slurmgen("report", job, "--json", cwd=tmp_path, env=slurm_cluster.env, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["progress_known"], data
    shown = data["program_checkpoint"]
    stops = shown["stops"]
    assert [s["kind"] for s in stops] == ["restart", "requeue"], stops
    truth = [max(first) - 80 + 1, max(second) - saves[1][-1] + 1]  # from the save's iteration to the last done
    assert near(stops[0]["lost_steps"], truth[0]) and near(stops[1]["lost_steps"], truth[1]), (stops, truth)
    spent = [seconds_since(log, 0, 80), seconds_since(log, 1, saves[1][-1])]
    assert near_seconds(stops[0]["lost_seconds"], spent[0]) and near_seconds(stops[1]["lost_seconds"], spent[1]), (
        stops, spent)  # fmt: skip
    assert near(data["redone_steps"], sum(truth)), (data["redone_steps"], truth)  # the restart's and the requeue's
    assert shown["saves"] >= 5 and not shown["ignored"]


def test_on_the_cluster_a_requeued_program_that_does_not_resume_is_said_at_its_first_progress(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """handler requeue and no resume.args: Slurm requeues the job and run 2 starts over at iteration 0 although
    the program's checkpoint is there. One line names the checkpoint and the fix, in the batch log while run 2
    still runs, and in `status` and `history`."""
    job = submit(slurm_cluster, tmp_path, resume=False)
    wait(lambda: len(re.findall(SAVED, read_log(tmp_path, "gpt", job, "rank-0.log"))) >= 3)
    scancel(slurm_cluster, "--batch", "--signal=USR1", job)
    said = "run 2 started at step 0 although "
    wait(lambda: said in read_log(tmp_path, "gpt", job, "batch"))
    info = slurm_cluster.wait_for(job, lambda i: True)
    assert not info.state.is_terminal, info.state_name  # said at the first progress line, not at the job's end
    line = next(line for line in read_log(tmp_path, "gpt", job, "batch").splitlines() if said in line)
    assert re.search(rf"{tmp_path}/out/ckpt.pt \(saved \d\d:\d\d:\d\d, run 1, step \d+\) exists: the program "
                     r"does not resume by itself; give it resume.args", line), line  # fmt: skip
    scancel(slurm_cluster, job)  # enough: the rest is the program starting over
    slurm_cluster.wait_for(job, lambda i: i.state.is_terminal, timeout=120)
    for command in ("status", "history"):
        done = run_slurmgen(command, job, cwd=tmp_path, env=slurm_cluster.env, timeout=60)
        assert said in done.stdout + done.stderr and "give it resume.args" in done.stdout + done.stderr, (
            command, done.stdout, done.stderr)  # fmt: skip
