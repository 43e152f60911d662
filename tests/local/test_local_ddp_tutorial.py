"""pytorch/examples' multinode DDP tutorial (the real multinode.py, vendored unmodified) under `slurmgen run` with
`launcher: torchrun`, as docs/local-runs.md "Programs written for CUDA only" tells a user to rehearse it on CPU:
the recipe's edits applied to a copy of it, its progress read from its own `[GPU0] Epoch N | ...` lines
(progress.pattern), its own snapshot.pt watched (checkpoint.path). Preempted after a save, it resumes from that
snapshot by itself, finishes its last epoch, and `slurmgen report` counts its saves and the epochs it did again as
its own lines tell. Real torch over gloo, real processes and signals."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cli_run import run_slurmgen

from local.ddp_tutorial import place
from local.test_local_handlers import LocalJob
from local.test_local_program_checkpoint import near, preempt
from local.test_local_recovery import own_port

pytestmark = [pytest.mark.slow, pytest.mark.torch]

PY = sys.executable
EPOCHS = 30
SAVE_EVERY = 12
# 2048 samples over 2 ranks in batches of 4: 256 steps an epoch, about half a second on CPU, so saves come
# seconds apart: the watch (one look a second) tells apart two in-place saves 1.5 s or more apart. The stop comes
# ten epochs after the second save, so the epochs done again are enough for 10% to be less than one.
BATCH = 4
EPOCH_LINE = r"^\[GPU0\] Epoch (\d+) \| Batchsize: \d+ \| Steps: \d+$"


def spec(cwd: Path) -> str:
    command = [PY, "multinode.py", str(EPOCHS), str(SAVE_EVERY), "--batch_size", str(BATCH)]
    return (
        f"name: job\ncommand: {command!r}\ntime: '00:10:00'\nnodes: 1\ngpus_per_node: 2\nlauncher: torchrun\n"
        f"python: {PY}\npreemption: {{handler: requeue}}\ncheckpoint: {{path: snapshot.pt}}\n"
        f"progress: {{pattern: '^\\[GPU0\\] Epoch (\\d+) \\|', total: {EPOCHS - 1}}}\n" + own_port(cwd)
    )


SAVE_LINE = r"^Epoch (\d+) \| Training snapshot saved at snapshot.pt$"


def followed_by_an_epoch(log: str) -> int:
    """Rank 0's saves after which the same start printed another epoch line."""
    told, pending = 0, False
    for line in log.splitlines():
        if line.startswith("Resuming training from snapshot at Epoch"):
            pending = False
        elif re.match(SAVE_LINE, line):
            pending = True
        elif pending and re.match(EPOCH_LINE, line):
            told, pending = told + 1, False
    return told


def starts(log: str, what: str = EPOCH_LINE) -> list[list[int]]:
    """Rank 0's epochs (or, with ``what``, its saves) per start of the program (a start that resumed opens with
    `Resuming training`)."""
    out: list[list[int]] = [[]]
    for line in log.splitlines():
        if line.startswith("Resuming training from snapshot at Epoch"):
            out.append([])
        elif found := re.match(what, line):
            out[-1].append(int(found[1]))
    return out


def saved(log: str) -> list[int]:
    return [int(n) for n in re.findall(SAVE_LINE, log, re.M)]


def test_the_tutorial_preempted_resumes_from_its_own_snapshot_and_the_report_counts_its_saves_and_redone_epochs(
    tmp_path: Path, jobs: list[LocalJob]
) -> None:
    """Preempted (what `--preempt-after` sends, at a moment of the test's choosing: ten epochs after its second
    save), the batch shell stops the step and requeues; run 2 loads snapshot.pt ("Resuming training from snapshot
    at Epoch K", the epoch of its last save) and trains on to the last epoch. The report knows its progress from the
    pattern, counts as saves exactly its snapshot saves, and the epochs done again as its lines tell, within 10%."""
    pytest.importorskip("torch")
    place(tmp_path, recipe=True)
    job = LocalJob(tmp_path, spec(tmp_path))
    jobs.append(job)
    job.wait_for(
        lambda: len(saved(job.file("rank-0.log"))) >= 2 and max(starts(job.file("rank-0.log"))[0], default=0) >= 22
    )
    preempt(job, 1)
    assert job.finish() == 0, job.everything()
    log = job.file("rank-0.log")
    first, second, *after = starts(log)
    if after:
        # torch's gloo, now and then, aborts a worker at its exit after the last epoch ("terminate called without
        # an active exception", SIGABRT): slurmgen restarts the step as it must, and that start resumes from the
        # last snapshot. It is torch's, not the story under test: the checks below take the requeue's stop.
        assert len(after) == 1 and second[-1] == EPOCHS - 1, log
        assert "restarting the step inside the allocation" in job.file("batch"), job.file("batch")
    saves = saved(log)
    resumed = [int(k) for k in re.findall(r"^Resuming training from snapshot at Epoch (\d+)$", log, re.M)]
    assert resumed[0] == starts(log, SAVE_LINE)[0][-1] and resumed[0] >= SAVE_EVERY, log  # its last save
    assert len(resumed) == 1 + len(after), log
    assert second[0] == resumed[0] and second[-1] == EPOCHS - 1 and first[-1] < EPOCHS - 1
    assert sorted(set(first + second)) == list(range(EPOCHS))  # nothing skipped
    assert "Loading snapshot" in log and "cannot run here" not in job.runner
    key = f"local-{job.job_id()}"
    done = run_slurmgen("report", key, "--json", cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["progress_known"] is True and data["requeues"] == 1, data
    assert [r["steps"] for r in data["runs"]][-1] == EPOCHS - 1, data["runs"]
    shown = data["program_checkpoint"]
    assert shown["saves"] == len(saves), (shown, saves)  # every snapshot save of both starts, nothing else
    assert shown["ignored"] == [], shown  # it resumed by itself: no resume.args wanted
    # torch.save in place, over within a poll: each save's cost told by the gap between the epoch lines around it,
    # where its start printed one after it; a save the stop came right after (the preemption lands in the epoch
    # that saves, under load) has no line after it to tell its cost, and is said to be unseen.
    if not after:
        told = followed_by_an_epoch(log)
        bases = {"progress": told, **({"unseen": len(saves) - told} if told < len(saves) else {})}
        assert shown["bases"] == bases and shown["timed"] == told, (shown, told, saves)
        assert data["advice_note"] is None, data["advice_note"]  # timed saves and a real (not rehearsed) preemption
    [stop] = [s for s in shown["stops"] if s["kind"] == "requeue"]
    assert stop["kind"] == "requeue", stop
    # The epochs done again: those both starts printed (upstream's snapshot of epoch K holds EPOCHS_RUN=K, so
    # the next start does epoch K again too).
    truth = len(set(first) & set(second))
    assert truth == first[-1] - resumed[0] + 1
    assert near(stop["lost_steps"], truth), (stop, truth)
    assert after or near(data["redone_steps"], truth), (data["redone_steps"], truth)
